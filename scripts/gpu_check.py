"""GPU check: HeRo routing on a Llama-3.1-8B-shaped backbone with random weights, in NF4 and bf16, one JSON out.

    python -m scripts.gpu_check [--shape llama-3.1-8b|tiny] [--device cuda] [--precisions bf16,nf4]
                                [--out gpu_check.json]
    python scripts/gpu_check.py --model-dir DIR [--data PATH] [--device cuda|cpu] [--train-steps N] [--out F]

The check is hero_core/cli/gpu_check.py (its docstring says what each mode records), the --model-dir flow
hero_core/cli/own_model_check.py; this file hands them the app's headless phase, app/headless.py.
"""

import runpy
import sys
from pathlib import Path

from hero_core.cli.gpu_check import main

# app/ is not part of the install: its file is run by path, as streamlit runs app/main.py, and only when
# --model-dir reaches the app phase (it imports streamlit)
HEADLESS = Path(__file__).resolve().parents[1] / "app" / "headless.py"

if __name__ == "__main__":
    sys.exit(main(app_phase=lambda *args: runpy.run_path(str(HEADLESS))["open_route_explorer"](*args)))
