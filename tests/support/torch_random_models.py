"""Random small classifiers built from PyTorch's layers, exported at random opsets (11-17) the way
users export them (torch.onnx.export, dynamic batch), for tests/cli/onnx_random_models.sh. Even
seeds: convolutional nets on [N, 1, 28, 28] (convolutions of every padding mode, stride, dilation
and group count, norms, pools with ceil_mode / count_include_pad / dilation, upsampling, padding
layers, pixel and channel shuffles, residuals, 17 activations, four heads); odd seeds: sequence
nets over the image's rows [N, 28, 28] (attention with and without a causal mask, LSTM / GRU /
RNN, token mixing, Conv1d, LayerNorm) or MLPs on [N, 784]. Each ends in logits, Softmax or
LogSoftmax. Random layouts for spmd come with each model.

  torch_random_models.py export DIR FIRST COUNT
      writes DIR/r<seed>.onnx and a line "<seed> <input dims> <output kind> <ranks> <devices>
      <batch> <strategy>" per model to DIR/models.txt (models PyTorch cannot export are left out,
      said on stderr)
  torch_random_models.py compare ONNX DIMS KIND PREDICTIONS DATA ORT_RUN
      ONNX Runtime's probabilities for the data's images against spmd's predictions file"""
import os, random, subprocess, sys
import numpy as np


def conv_layer(nn, r, c, h):
    k = r.choice(["conv", "conv", "conv", "bn", "act", "act", "maxpool", "avgpool", "lppool", "upsample", "pad",
                  "inorm", "gnorm", "residual", "dropout", "shuffle", "pixelshuffle"])
    if k == "conv":
        co, ks, stride, dil = r.choice([4, 6, 8, 12, 16]), r.choice([1, 2, 3, 3, 5]), r.choice([1, 1, 2]), r.choice([1, 1, 2])
        groups = r.choice([g for g in [1, 1, 2, 4, c] if c % g == 0 and co % g == 0])
        mode = r.choice(["zeros", "zeros", "reflect", "replicate", "circular"])
        pad = r.choice([0, 1, 2, "same"] if stride == 1 and mode == "zeros" else [0, 1, 2])
        return nn.Conv2d(c, co, ks, stride, pad, dil, groups, bias=r.random() < 0.7, padding_mode=mode)
    if k == "bn":
        bn = nn.BatchNorm2d(c)
        bn.running_mean.uniform_(-0.5, 0.5), bn.running_var.uniform_(0.5, 2), bn.weight.data.uniform_(0.5, 1.5)
        return bn
    if k == "act":
        return activation(nn, r, c)
    if k in ("maxpool", "avgpool"):
        ks = r.choice([2, 3])
        st, p, ceil = r.choice([1, 2, ks]), r.choice([0, ks // 2]), r.random() < 0.5
        if k == "maxpool":
            return nn.MaxPool2d(ks, st, p, dilation=r.choice([1, 1, 2]), ceil_mode=ceil)
        return nn.AvgPool2d(ks, st, p, ceil_mode=ceil, count_include_pad=r.random() < 0.5)
    if k == "lppool":
        return nn.LPPool2d(r.choice([1, 2]), 2, 2)
    if k == "upsample":
        mode = r.choice(["nearest", "bilinear", "align_corners"])
        if h > 20:
            return nn.Identity()
        if mode == "align_corners":
            return nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        return nn.Upsample(scale_factor=2, mode=mode)
    if k == "pad":
        p = tuple(r.choice([0, 1, 2]) for _ in range(4))
        return r.choice([nn.ZeroPad2d(p), nn.ConstantPad2d(p, 0.3), nn.ReflectionPad2d(tuple(min(v, 1) for v in p)),
                         nn.ReplicationPad2d(p)])
    if k == "inorm":
        return nn.InstanceNorm2d(c, affine=r.random() < 0.5)
    if k == "gnorm":
        return nn.GroupNorm(r.choice([g for g in [1, 2, 4] if c % g == 0]), c)
    if k == "residual":
        return Residual(nn.Sequential(nn.Conv2d(c, c, 3, 1, 1), activation(nn, r, c)))
    if k == "dropout":
        return nn.Dropout2d(0.3) if r.random() < 0.5 else nn.Dropout(0.2)
    if k == "shuffle":
        return ChannelShuffle(2) if c % 2 == 0 else nn.Identity()
    return nn.PixelShuffle(2) if c % 4 == 0 and h <= 14 else nn.Identity()


def activation(nn, r, c):
    return r.choice([nn.ReLU(), nn.LeakyReLU(r.choice([0.01, 0.2])), nn.ELU(r.choice([1.0, 0.5])), nn.SELU(), nn.GELU(),
                     nn.GELU(approximate="tanh"), nn.SiLU(), nn.Mish(), nn.Hardswish(), nn.Hardsigmoid(), nn.Softplus(),
                     nn.Tanh(), nn.Sigmoid(), nn.ReLU6(), nn.PReLU(c, init=r.uniform(0.05, 0.5)), nn.PReLU(),
                     nn.CELU(0.7), nn.Softsign(), nn.Hardtanh(-0.5, 0.5)])


def seq_layer(nn, r, t):
    d = t.shape[-1]
    k = r.choice(["linear", "act", "ln", "drop", "bn"] if t.dim() == 2 else
                 ["linear", "act", "ln", "drop", "attn", "rnn", "mix", "conv1"])
    if k == "linear":
        return nn.Linear(d, r.choice([16, 24, 32, 64]), bias=r.random() < 0.8)
    if k == "act":
        return activation(nn, r, 1)
    if k == "ln":  # PyTorch 1.13 writes an unloadable LayerNormalization without the affine at opset 17
        return nn.LayerNorm(d)
    if k == "drop":
        return nn.Dropout(0.3)
    if k == "bn":
        bn = nn.BatchNorm1d(d)
        bn.running_mean.uniform_(-0.3, 0.3), bn.running_var.uniform_(0.5, 2)
        return bn
    if k == "attn":
        return Attention(nn, d, r.choice([h for h in [1, 2, 4] if d % h == 0]), r.random() < 0.3, r.random() < 0.5)
    if k == "rnn":
        kind = r.choice([nn.LSTM, nn.GRU, nn.RNN])
        return Recurrent(kind(d, r.choice([8, 16]), num_layers=r.choice([1, 2]), batch_first=True,
                              bidirectional=r.random() < 0.5))
    if k == "mix":
        return TokenMix(nn, t.shape[1])
    ks = r.choice([1, 3, 5])
    return Conv1d(nn.Conv1d(d, d, ks, padding=ks // 2, groups=r.choice([1, d])))


def build(seed):
    import torch
    from torch import nn
    r = random.Random(seed)
    torch.manual_seed(seed)
    convolutional = seed % 2 == 0
    flat = not convolutional and r.random() < 0.3
    dims = [1, 28, 28] if convolutional else [784] if flat else [28, 28]
    t = torch.rand([2] + dims)
    layers = []
    for _ in range(r.randint(1, 6)):
        for _ in range(20):  # a layer the shape admits, keeping the activations small
            c, h = (t.shape[1], t.shape[2]) if t.dim() == 4 else (0, 0)
            layer = conv_layer(nn, r, c, h) if convolutional else seq_layer(nn, r, t)
            try:
                with torch.no_grad():
                    u = layer.eval()(t)
            except Exception:
                continue
            if u.numel() // 2 <= 20000 and all(s >= 1 for s in u.shape):
                layers.append(layer)
                t = u
                break
    if convolutional:
        c, h, w = t.shape[1:]
        head = r.choice(["flat", "avg", "max", "adaptive"])
        s = r.choice([s for s in [1, 2, 3, 4] if h % s == 0 and w % s == 0]) if head == "adaptive" else 1
        pool = {"flat": nn.Identity(), "avg": nn.AdaptiveAvgPool2d(1), "max": nn.AdaptiveMaxPool2d(1),
                "adaptive": nn.AdaptiveAvgPool2d(s)}[head]
        layers += [pool, nn.Flatten(), nn.Linear(c * (h * w if head == "flat" else s * s), 10)]
    else:
        if t.dim() == 3:
            layers.append(Pool(r.choice(["mean", "last", "max", "flat"])))
            t = layers[-1](t)
        layers.append(nn.Linear(t.shape[-1], 10))
    kind = r.choice(["logits", "logits", "probabilities", "log-probabilities"])
    layers += {"logits": [], "probabilities": [nn.Softmax(-1)], "log-probabilities": [nn.LogSoftmax(-1)]}[kind]
    layout = (r.choice([1, 2, 3]), r.choice([1, 2]), r.choice([5, 32, 512]), r.choice(["pad", "infinite-pad", "pad-metrics"]))
    return nn.Sequential(*layers).eval(), dims, kind, r.choice(range(11 if convolutional else 13, 18)), layout


def define_modules():
    global Residual, ChannelShuffle, Attention, Recurrent, TokenMix, Conv1d, Pool
    import torch
    from torch import nn

    class Residual(nn.Module):
        def __init__(self, body):
            super().__init__()
            self.body = body

        def forward(self, t):
            return t + self.body(t)

    class ChannelShuffle(nn.Module):
        def __init__(self, groups):
            super().__init__()
            self.g = groups

        def forward(self, t):
            n, c, h, w = t.shape
            return t.reshape(n, self.g, c // self.g, h, w).transpose(1, 2).reshape(n, c, h, w)

    class Attention(nn.Module):  # pre- or post-norm self-attention with a residual
        def __init__(self, nn, d, heads, causal, norm_first):
            super().__init__()
            self.m, self.ln = nn.MultiheadAttention(d, heads, batch_first=True), nn.LayerNorm(d)
            self.causal, self.norm_first = causal, norm_first

        def forward(self, t):
            u = self.ln(t) if self.norm_first else t
            n = t.shape[1]
            mask = torch.triu(torch.full((n, n), float("-inf")), 1) if self.causal else None
            return t + self.m(u, u, u, need_weights=False, attn_mask=mask)[0]

    class Recurrent(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, t):
            return self.m(t)[0]

    class TokenMix(nn.Module):  # a Linear over the tokens (MLP-Mixer style), with a residual
        def __init__(self, nn, tokens):
            super().__init__()
            self.l = nn.Linear(tokens, tokens)

        def forward(self, t):
            return t + self.l(t.transpose(1, 2)).transpose(1, 2)

    class Conv1d(nn.Module):
        def __init__(self, conv):
            super().__init__()
            self.c = conv

        def forward(self, t):
            return self.c(t.transpose(1, 2)).transpose(1, 2)

    class Pool(nn.Module):
        def __init__(self, how):
            super().__init__()
            self.how = how

        def forward(self, u):
            if self.how == "mean":
                return u.mean(1)
            if self.how == "last":
                return u[:, -1]
            return u.amax(1) if self.how == "max" else u.flatten(1)


def export(out, first, count):
    import torch
    import warnings
    warnings.filterwarnings("ignore")
    define_modules()
    listing = open(f"{out}/models.txt", "w")
    for seed in range(first, first + count):
        model, dims, kind, opset, layout = build(seed)
        path = f"{out}/r{seed}.onnx"
        try:
            torch.onnx.export(model, torch.rand([2] + dims), path, opset_version=opset, input_names=["x"],
                              output_names=["y"], dynamic_axes={"x": {0: "n"}, "y": {0: "n"}})
        except Exception as e:  # PyTorch's own limits (adaptive pools of unknown size, triu below opset 14)
            print(f"seed {seed}: PyTorch cannot export it at opset {opset}: {type(e).__name__}", file=sys.stderr)
            continue
        print(seed, ",".join(map(str, dims)), kind, *layout, file=listing, flush=True)


def compare(model, dims, kind, predictions, data, ort_run):
    import h5py
    with h5py.File(predictions) as f:
        probs, predicted = f["probabilities"][...], f["predicted"][...]
    with h5py.File(data) as f:
        x = f["images"][...].astype(np.float32) / np.float32(255)
    shape = [len(x)] + [int(d) for d in dims.split(",")]
    base = os.path.splitext(predictions)[0]
    x.reshape(shape).astype("<f4").tofile(base + ".in")  # one channel: NHWC and NCHW are the same bytes
    subprocess.run(["node", ort_run, model, base + ".in", ",".join(map(str, shape)), base + ".ort"], check=True,
                   stdout=subprocess.DEVNULL)
    y = np.fromfile(base + ".ort", "<f4").reshape(len(x), -1).astype(np.float64)
    if kind == "log-probabilities":
        y = np.exp(y)
    elif kind == "logits":
        y = np.exp(y - y.max(1, keepdims=True))
        y /= y.sum(1, keepdims=True)
    top2 = np.sort(y, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 1e-4
    diff = float(np.abs(y - probs).max())
    wrong = int(((y.argmax(1) != predicted) & clear).sum())
    print(f"{os.path.basename(model)} vs ONNX Runtime: max |diff| {diff:.2e}, {wrong} of {len(x)} classes differ")
    return diff <= 1e-4 and wrong == 0


if __name__ == "__main__":
    if sys.argv[1] == "export":
        export(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(0 if compare(*sys.argv[2:8]) else 1)
