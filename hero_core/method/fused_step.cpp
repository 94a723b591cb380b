// One routed block's router decision at a decode step, in one call: the same tensor operations as
// decide_packed (hero_core/core/packed_router.py) in the same order, issued from C++; and the whole block
// (routed_block: the decision, then the FFN or the adapter per token, as RoutedFFN._branch does). At one token per
// step each operation's fixed cost (Python argument parsing and the interpreter) is most of the router's
// time; here only ATen's dispatch remains. Compiled on first use by hero_core.core.fused_router and cached
// on disk. The Python packed path stays the reference: tests/test_fast_router.py holds both to the same gates.
#include <torch/extension.h>

#include <algorithm>
#include <cmath>
#include <vector>

using torch::Tensor;

// Weights, in the order PackedLayers.fused_weights lists them (hero_core/core/packed_router.py) for block j.
enum Weight {
  kFirstWeightT, kFirstBias, kPathWeightT, kPathBias, kStateWeightT, kStateBias, kProjWeightT, kProjBias,
  kContextWeightT, kNoveltyWeight, kFinalWeightT, kFinalBias, kDecayRow, kWeightCount
};

// Returns {gate, history_logit, local_logit, p_hist, m_hist, nu, memory_attention, state, context, delta,
// dist}. `prev` holds {hbar_prev, delta_prev, dist_prev, p_hist, m_hist} (empty at j = 1); `memory` holds
// {keys, values} (empty without a memory read), written in place at slot j - 1 before the read.
// scale > 0: the softmax kernel (kDecayRow is log decay); otherwise elu1 (kDecayRow is the decay).
std::vector<Tensor> decide_aten(const Tensor& hbar, int64_t j, const std::vector<Tensor>& prev,
                           const std::vector<Tensor>& memory, const std::vector<Tensor>& w, double rms_eps,
                           double eps, double scale, int64_t d_state, int64_t d_memory, int64_t head_hidden) {
  TORCH_CHECK(w.size() == kWeightCount, "fused router step: expected ", int(kWeightCount), " weights");
  const int64_t n = hbar.size(0), dm = d_memory;
  Tensor delta, dist, features;
  if (j == 1) {
    dist = hbar.new_zeros({n});
    delta = at::zeros_like(hbar);
    features = hbar.new_zeros({n, 4});
    features.narrow(1, 2, 2).fill_(1.0);
  } else {
    TORCH_CHECK(prev.size() == 5, "fused router step: block ", j, " needs the previous block's path state");
    delta = hbar - prev[0];
    dist = at::linalg_vector_norm(delta, 2, {-1});
    Tensor gamma = j >= 3 ? at::linalg_vecdot(delta, prev[1]) / (dist.clamp_min(eps) * prev[2].clamp_min(eps))
                          : hbar.new_zeros({n});
    features = at::stack({at::log1p(dist), gamma, prev[3], prev[4]}, -1);
  }
  Tensor inv_rms = hbar.square().mean(-1, true).add_(rms_eps).rsqrt_();
  Tensor first = at::addmm(w[kFirstBias], hbar * inv_rms, w[kFirstWeightT]);
  Tensor act = at::silu(at::cat({first, at::addmm(w[kPathBias], features, w[kPathWeightT])}, 1));
  Tensor state_local = at::addmm(w[kStateBias], act, w[kStateWeightT]);
  Tensor state = state_local.narrow(1, 0, d_state);
  Tensor local_logit = state_local.select(1, d_state);
  Tensor proj = at::addmm(w[kProjBias], state, w[kProjWeightT]);
  auto parts = proj.split_with_sizes({2 * dm, dm + 1, dm, head_hidden}, 1);
  Tensor qk = parts[0], v_one = parts[1], ns = parts[2], history_in = parts[3];
  const bool softmax = scale > 0.0;
  Tensor context, weights, nu;
  if (!memory.empty()) {
    Tensor stored_qk = softmax ? qk : at::elu(qk).add_(1.0);  // [q, k] or [phi(q), phi(k)]
    memory[0].select(1, j - 1).copy_(stored_qk.narrow(1, dm, dm));  // write: the read gives slot j-1 weight 0
    memory[1].select(1, j - 1).copy_(v_one);
    if (j > 1) {
      Tensor scores = at::bmm(stored_qk.narrow(1, 0, dm).unsqueeze(1), memory[0].transpose(1, 2));  // (N, 1, R)
      if (softmax) {  // unwritten slots have log decay -inf: weight exactly 0
        scores = at::softmax(scores.mul_(scale).add_(w[kDecayRow]), -1);
        context = at::bmm(scores, memory[1]).squeeze(1).narrow(1, 0, dm);
        weights = scores.squeeze(1).narrow(1, 0, j - 1);
      } else {
        scores.mul_(w[kDecayRow]);
        Tensor read = at::bmm(scores, memory[1]).squeeze(1);  // [sum w v, sum w]
        Tensor denominator = read.narrow(1, dm, 1).add(eps);
        context = read.narrow(1, 0, dm) / denominator;
        weights = scores.squeeze(1).narrow(1, 0, j - 1) / denominator;
      }
      auto mapped = at::mm(context, w[kContextWeightT]).split_with_sizes({dm, head_hidden}, 1);
      Tensor wc = mapped[0];
      nu = at::linalg_vecdot(ns, wc).div_(at::linalg_vector_norm(ns, 2, {-1}).clamp_min_(eps) *
                                         at::linalg_vector_norm(wc, 2, {-1}).clamp_min_(eps));
      nu = nu.neg_().add_(1.0);
      history_in = at::addcmul(history_in + mapped[1], nu.unsqueeze(1), w[kNoveltyWeight]);
    }
  }
  if (!nu.defined()) {
    context = hbar.new_zeros({n, dm});
    weights = hbar.new_zeros({n, j - 1});
    nu = hbar.new_zeros({n});
  }
  Tensor final_ = at::addmm(w[kFinalBias], at::silu(history_in), w[kFinalWeightT]);  // [a, a / T, a]
  final_.select(1, 2).add_(local_logit);
  Tensor squashed = at::sigmoid(final_.narrow(1, 1, 2));  // [p_hist, g]
  Tensor p_hist = squashed.select(1, 0);
  Tensor m_hist = j == 1 ? p_hist : prev[4] * p_hist;
  return {squashed.select(1, 1), final_.select(1, 0), local_logit, p_hist, m_hist, nu, weights, state, context,
          delta, dist};
}

// ---- fp32 on the CPU: the same function as plain loops over a few small matrices --------------------------
// At one token the products are 4 matrix-vector products of ~0.3 M multiply-adds in all per block; plain loops
// (the inner loop runs along a weight row, so the compiler vectorises it) cost less than ATen's per-operation
// dispatch and allocation. Sums run in a different order than the BLAS products: equal to float rounding.
namespace {

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// y[0:cols] = bias + sum_i x[i] * w[i, 0:cols], w row-major (rows, cols)
void affine(const float* x, int64_t rows, const float* w, const float* bias, int64_t cols, float* y) {
  std::copy(bias, bias + cols, y);
  for (int64_t i = 0; i < rows; ++i) {
    const float xi = x[i];
    const float* row = w + i * cols;
    for (int64_t o = 0; o < cols; ++o) y[o] += xi * row[o];
  }
}

float dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

bool fp32_contiguous(const Tensor& t) { return t.scalar_type() == at::kFloat && t.is_contiguous() && t.is_cpu(); }

}  // namespace

std::vector<Tensor> decide_fp32(const Tensor& hbar, int64_t j, const std::vector<Tensor>& prev,
                                const std::vector<Tensor>& memory, const std::vector<Tensor>& w, double rms_eps,
                                double eps_, double scale, int64_t d_state, int64_t d_memory, int64_t head_hidden) {
  const int64_t n = hbar.size(0), d = hbar.size(1), dm = d_memory, H = head_hidden, ds = d_state;
  const int64_t f1 = w[kFirstWeightT].size(1), np = w[kPathWeightT].size(1);
  const int64_t width = w[kProjWeightT].size(1), R = memory.empty() ? 0 : memory[0].size(1);
  const float eps = static_cast<float>(eps_);
  const bool softmax = scale > 0.0, has_memory = !memory.empty(), read = has_memory && j > 1;
  Tensor delta = at::empty({n, d}, hbar.options());
  // one buffer for the (N,)-sized results and the rows of weights, state and context, returned as views
  const int64_t k = j - 1, cols = 7 + k + ds + dm;
  Tensor small = at::empty({n, cols}, hbar.options());
  std::vector<float> act(f1 + np), state_local(ds + 1), proj(width), scores(std::max<int64_t>(R, 1)),
      mapped(dm + H), ctx(dm + 1), hist(H), final_(3);
  const float* h_all = hbar.data_ptr<float>();
  float* delta_all = delta.data_ptr<float>();
  for (int64_t t = 0; t < n; ++t) {
    const float* h = h_all + t * d;
    float* dl = delta_all + t * d;
    float* out = small.data_ptr<float>() + t * cols;  // [gate, a, b, p, m, nu, dist, weights, state, context]
    float features[4] = {0.0f, 0.0f, 1.0f, 1.0f}, dist = 0.0f, m_prev = 1.0f;
    if (j == 1) {
      std::fill(dl, dl + d, 0.0f);
    } else {
      const float* hp = prev[0].data_ptr<float>() + t * prev[0].stride(0);
      for (int64_t i = 0; i < d; ++i) dl[i] = h[i] - hp[i];
      dist = std::sqrt(dot(dl, dl, d));
      float gamma = 0.0f;
      if (j >= 3) {
        const float* dp = prev[1].data_ptr<float>() + t * prev[1].stride(0);
        const float dist_prev = prev[2].data_ptr<float>()[t * prev[2].stride(0)];
        gamma = dot(dl, dp, d) / (std::max(dist, eps) * std::max(dist_prev, eps));
      }
      m_prev = prev[4].data_ptr<float>()[t * prev[4].stride(0)];
      features[0] = std::log1p(dist);
      features[1] = gamma;
      features[2] = prev[3].data_ptr<float>()[t * prev[3].stride(0)];
      features[3] = m_prev;
    }
    const float inv_rms = 1.0f / std::sqrt(dot(h, h, d) / d + static_cast<float>(rms_eps));
    std::fill(act.begin(), act.begin() + f1, 0.0f);
    std::copy(w[kFirstBias].data_ptr<float>(), w[kFirstBias].data_ptr<float>() + f1, act.begin());
    const float* w1 = w[kFirstWeightT].data_ptr<float>();
    for (int64_t i = 0; i < d; ++i) {
      const float xi = h[i] * inv_rms;
      const float* row = w1 + i * f1;
      for (int64_t o = 0; o < f1; ++o) act[o] += xi * row[o];
    }
    affine(features, 4, w[kPathWeightT].data_ptr<float>(), w[kPathBias].data_ptr<float>(), np, act.data() + f1);
    for (auto& a : act) a = silu(a);
    affine(act.data(), f1 + np, w[kStateWeightT].data_ptr<float>(), w[kStateBias].data_ptr<float>(), ds + 1,
           state_local.data());
    affine(state_local.data(), ds, w[kProjWeightT].data_ptr<float>(), w[kProjBias].data_ptr<float>(), width,
           proj.data());
    float* q = proj.data();  // [q | k | v, 1 | W_n s | history head's s-part]
    float* ns = proj.data() + 3 * dm + 1;
    std::copy(proj.data() + 4 * dm + 1, proj.data() + width, hist.begin());
    float* weights_out = out + 7;
    float* context_out = out + 7 + k + ds;
    float nu = 0.0f;
    std::fill(context_out, context_out + dm, 0.0f);
    if (has_memory) {
      if (!softmax)
        for (int64_t i = 0; i < 2 * dm; ++i) q[i] = q[i] > 0.0f ? q[i] + 1.0f : std::expm1(q[i]) + 1.0f;
      float* keys = memory[0].data_ptr<float>() + t * R * dm;
      float* values = memory[1].data_ptr<float>() + t * R * (dm + 1);
      std::copy(q + dm, q + 2 * dm, keys + (j - 1) * dm);  // write before the read, which skips slot j-1
      std::copy(q + 2 * dm, q + 3 * dm + 1, values + (j - 1) * (dm + 1));
      if (read) {
        const float* row = w[kDecayRow].data_ptr<float>();
        std::fill(ctx.begin(), ctx.end(), 0.0f);
        if (softmax) {
          float top = -INFINITY;
          for (int64_t i = 0; i < k; ++i) {
            scores[i] = dot(q, keys + i * dm, dm) * static_cast<float>(scale) + row[i];
            top = std::max(top, scores[i]);
          }
          float total = 0.0f;
          for (int64_t i = 0; i < k; ++i) total += (scores[i] = std::exp(scores[i] - top));
          for (int64_t i = 0; i < k; ++i) scores[i] /= total;
        } else {
          for (int64_t i = 0; i < k; ++i) scores[i] = dot(q, keys + i * dm, dm) * row[i];
        }
        for (int64_t i = 0; i < k; ++i) {
          const float* v = values + i * (dm + 1);
          for (int64_t c = 0; c <= dm; ++c) ctx[c] += scores[i] * v[c];
        }
        const float denominator = softmax ? 1.0f : ctx[dm] + eps;
        for (int64_t c = 0; c < dm; ++c) context_out[c] = ctx[c] / denominator;
        for (int64_t i = 0; i < k; ++i) weights_out[i] = scores[i] / denominator;
        std::vector<float> zero(dm + H, 0.0f);
        affine(context_out, dm, w[kContextWeightT].data_ptr<float>(), zero.data(), dm + H, mapped.data());
        const float* wc = mapped.data();
        const float norms = std::max(std::sqrt(dot(ns, ns, dm)), eps) * std::max(std::sqrt(dot(wc, wc, dm)), eps);
        nu = 1.0f - dot(ns, wc, dm) / norms;
        const float* novelty = w[kNoveltyWeight].data_ptr<float>();
        for (int64_t c = 0; c < H; ++c) hist[c] += mapped[dm + c] + nu * novelty[c];
      }
    }
    if (!read) std::fill(weights_out, weights_out + k, 0.0f);
    for (auto& x : hist) x = silu(x);
    affine(hist.data(), H, w[kFinalWeightT].data_ptr<float>(), w[kFinalBias].data_ptr<float>(), 3, final_.data());
    const float local_logit = state_local[ds];
    const float p_hist = sigmoid(final_[1]);
    out[0] = sigmoid(final_[2] + local_logit);
    out[1] = final_[0];
    out[2] = local_logit;
    out[3] = p_hist;
    out[4] = j == 1 ? p_hist : m_prev * p_hist;
    out[5] = nu;
    out[6] = dist;
    std::copy(state_local.begin(), state_local.begin() + ds, out + 7 + k);
  }
  return {small.select(1, 0), small.select(1, 1), small.select(1, 2), small.select(1, 3), small.select(1, 4),
          small.select(1, 5), small.narrow(1, 7, k), small.narrow(1, 7 + k, ds), small.narrow(1, 7 + k + ds, dm),
          delta, small.select(1, 6)};
}

// Whether the loops can serve this call: every operand fp32 on the CPU, the weights, memory and hbar contiguous.
// The previous block's outputs are views into its result buffer: the (N, d) rows need unit stride along d, the
// (N,) ones are read through their stride (they are columns of that buffer, stride = its width).
bool takes_loops(const Tensor& hbar, const std::vector<Tensor>& prev, const std::vector<Tensor>& memory,
                 const std::vector<Tensor>& w) {
  bool loops = fp32_contiguous(hbar);
  for (const auto& t : w) loops = loops && fp32_contiguous(t);
  for (const auto& t : memory) loops = loops && fp32_contiguous(t);
  for (const auto& t : prev) loops = loops && t.scalar_type() == at::kFloat && t.is_cpu();
  for (size_t i = 0; i < std::min<size_t>(prev.size(), 2); ++i) loops = loops && prev[i].stride(-1) == 1;
  return loops;
}

std::vector<Tensor> decide(const Tensor& hbar, int64_t j, const std::vector<Tensor>& prev,
                           const std::vector<Tensor>& memory, const std::vector<Tensor>& w, double rms_eps,
                           double eps, double scale, int64_t d_state, int64_t d_memory, int64_t head_hidden) {
  TORCH_CHECK(w.size() == kWeightCount, "fused router step: expected ", int(kWeightCount), " weights");
  auto step = takes_loops(hbar, prev, memory, w) ? decide_fp32 : decide_aten;
  return step(hbar, j, prev, memory, w, rms_eps, eps, scale, d_state, d_memory, head_hidden);
}

// ---- the whole routed block: the decision, then each token's branch ----------------------------------------
// At one token per step the block around the decision (the module calls of a gated FFN, the gather and
// scatter of _branch) cost Python per block as much as the decision did. Here the same operations as
// RoutedFFN._branch run in the same order: FFN(u) = W_down (SiLU(W_gate u) * W_up u) where g >= tau,
// Adapter(u) = W_2 SiLU(W_1 u) elsewhere, each scaled by g / (1 - g) when `scaled` (the paper's branch scaling).
namespace {

Tensor gated_ffn(const Tensor& u, const std::vector<Tensor>& ffn) {
  return at::linear(at::silu(at::linear(u, ffn[0])) * at::linear(u, ffn[1]), ffn[2]);
}

Tensor adapter_branch(const Tensor& u, const std::vector<Tensor>& adapter) {
  return at::linear(at::silu(at::linear(u.to(adapter[0].scalar_type()), adapter[0])), adapter[1]);
}

}  // namespace

// Returns decide's outputs followed by {executed, out, hbar in the router's precision} (the next block's delta is
// taken against the latter). `ffn` holds {W_gate, W_up, W_down} (no biases), `adapter` {W_1, W_2}; hbar arrives in
// the backbone's precision and is cast to the router's here.
std::vector<Tensor> routed_block(const Tensor& u, const Tensor& hbar, double tau, bool scaled,
                                 const std::vector<Tensor>& ffn, const std::vector<Tensor>& adapter, int64_t j,
                                 const std::vector<Tensor>& prev, const std::vector<Tensor>& memory,
                                 const std::vector<Tensor>& w, double rms_eps, double eps, double scale,
                                 int64_t d_state, int64_t d_memory, int64_t head_hidden) {
  TORCH_CHECK(ffn.size() == 3 && adapter.size() == 2, "fused routed block: expected 3 FFN and 2 adapter weights");
  TORCH_CHECK(w.size() == kWeightCount, "fused router step: expected ", int(kWeightCount), " weights");
  Tensor h = hbar.to(w[kFirstWeightT].scalar_type());
  std::vector<Tensor> out = decide(h, j, prev, memory, w, rms_eps, eps, scale, d_state, d_memory, head_hidden);
  const Tensor& gate = out[0];
  Tensor executed = gate.ge(tau);
  const int64_t n = u.size(0), n_ffn = executed.sum().item<int64_t>();
  auto ffn_part = [&](const Tensor& x, const Tensor& g) {
    Tensor y = gated_ffn(x, ffn);
    return scaled ? g.unsqueeze(1).to(x.scalar_type()) * y : y;
  };
  auto adapter_part = [&](const Tensor& x, const Tensor& g) {
    Tensor y = adapter_branch(x, adapter);
    return (scaled ? (1 - g.unsqueeze(1)) * y : y).to(x.scalar_type());
  };
  Tensor result;
  if (n_ffn == n) {
    result = ffn_part(u, gate);
  } else if (n_ffn == 0) {
    result = adapter_part(u, gate);
  } else {
    result = at::empty_like(u);
    Tensor idx = executed.nonzero().squeeze(1);
    result.index_copy_(0, idx, ffn_part(u.index_select(0, idx), gate.index_select(0, idx)));
    idx = executed.logical_not().nonzero().squeeze(1);
    result.index_copy_(0, idx, adapter_part(u.index_select(0, idx), gate.index_select(0, idx)));
  }
  out.push_back(executed);
  out.push_back(result);
  out.push_back(h);
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("routed_block", &routed_block, "one routed block of a decode step: the decision and each token's branch");
  m.def("decide", &decide, "HeRo router decision at one routed block of a decode step");
  m.def("takes_loops", &takes_loops, "whether decide runs the fp32 loops for these operands");
  m.def("decide_aten", &decide_aten, "the same decision issued as ATen operations (any dtype or device)");
}
