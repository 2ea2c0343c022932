"""More kinds of classifiers users train, exported the way users export them (torch.onnx.export,
dynamic batch, opsets 13 and 17), with PyTorch's own probabilities on a data file: the layers and
idioms of today's architectures, each of which brings ops of its own into the graph.

  torch_zoo.py export DIR          writes DIR/NAME.opset13.onnx and DIR/NAME.opset17.onnx
  torch_zoo.py outputs DIR DATA    writes DIR/NAME.torch.npy: probabilities [N, C] per model
  torch_zoo.py names               prints the model names and their input layouts

Weights are PyTorch's initialisation with a fixed seed (normalisation statistics set to
non-trivial values)."""
import sys
import numpy as np
import torch
from torch import nn
import torch.nn.functional as F


class ViT(nn.Module):  # patch embedding, class token (expand: Equal + Where), nn.TransformerEncoder
    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(1, 32, 7, 7)
        self.cls = nn.Parameter(torch.randn(1, 1, 32))
        self.pos = nn.Parameter(torch.randn(1, 17, 32))
        layer = nn.TransformerEncoderLayer(32, 4, 64, 0.1, activation="gelu", batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2)
        self.norm = nn.LayerNorm(32)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        return self.head(self.norm(self.encoder(x)[:, 0]))


class Attention(nn.Module):  # hand-written attention: qkv split by unbind (Split), batched MatMul
    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(1, 32, 4, 4)
        self.qkv = nn.Linear(32, 96)
        self.proj = nn.Linear(32, 32)
        self.norm = nn.LayerNorm(32)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        b, n, c = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(b, n, 3, 4, 8).permute(2, 0, 3, 1, 4).unbind(0)
        a = (q @ k.transpose(-2, -1)) * 8 ** -0.5
        x = x + self.proj((a.softmax(-1) @ v).transpose(1, 2).reshape(b, n, c))
        return self.head(x.mean(1))


class ConvNeXt(nn.Module):  # depthwise 7x7, LayerNorm on channels-last (permute), GELU, layer scale
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 16, 4, 4)
        self.dw = nn.Conv2d(16, 16, 7, padding=3, groups=16)
        self.norm = nn.LayerNorm(16)
        self.pw1, self.pw2 = nn.Linear(16, 64), nn.Linear(64, 16)
        self.gamma = nn.Parameter(torch.full((16,), 0.5))
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = self.stem(x)
        y = self.pw2(F.gelu(self.pw1(self.norm(self.dw(x).permute(0, 2, 3, 1))))) * self.gamma
        return self.head((x + y.permute(0, 3, 1, 2)).mean([-2, -1]))


class SqueezeExcite(nn.Module):  # MobileNetV3-style: Hardswish (HardSwish from opset 14), SE block
    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(1, 16, 3, 2, 1), nn.BatchNorm2d(16)
        self.se1, self.se2 = nn.Conv2d(16, 4, 1), nn.Conv2d(4, 16, 1)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = F.hardswish(self.bn(self.conv(x)))
        x = x * F.hardsigmoid(self.se2(F.relu(self.se1(F.adaptive_avg_pool2d(x, 1)))))
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


class GroupNormSiLU(nn.Module):  # GroupNorm (InstanceNormalization), SiLU, adaptive pooling to 7x7
    def __init__(self):
        super().__init__()
        self.conv, self.norm = nn.Conv2d(1, 16, 3, 1, 1), nn.GroupNorm(4, 16)
        self.head = nn.Linear(16 * 7 * 7, 10)

    def forward(self, x):
        x = F.adaptive_avg_pool2d(F.silu(self.norm(self.conv(x))), 7)
        return self.head(x.reshape(x.size(0), -1))


class Sequence1d(nn.Module):  # the image's rows as a sequence: Conv1d, BatchNorm1d, max over time
    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv1d(28, 32, 3, padding=1), nn.BatchNorm1d(32)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(F.max_pool1d(F.relu(self.bn(self.conv(x))), 2).max(dim=2).values)


class DenseNet(nn.Module):  # dense connections (Concat), ceil_mode pooling, amax
    def __init__(self):
        super().__init__()
        self.c0, self.c1 = nn.Conv2d(1, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1)
        self.c2, self.transition = nn.Conv2d(16, 8, 3, padding=1), nn.Conv2d(24, 12, 1)
        self.head = nn.Linear(12, 10)

    def forward(self, x):
        a = F.relu(self.c0(x))
        b = F.relu(self.c1(a))
        c = F.relu(self.c2(torch.cat([a, b], 1)))
        x = F.avg_pool2d(self.transition(torch.cat([a, b, c], 1)), 2, ceil_mode=True)
        return self.head(torch.amax(x, dim=(2, 3)))


class SqueezeNet(nn.Module):  # fire module, ceil_mode max-pool, a convolutional classifier
    def __init__(self):
        super().__init__()
        self.conv, self.squeeze = nn.Conv2d(1, 16, 3, 2), nn.Conv2d(16, 4, 1)
        self.e1, self.e3 = nn.Conv2d(4, 8, 1), nn.Conv2d(4, 8, 3, padding=1)
        self.classifier = nn.Conv2d(16, 10, 1)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv(x)), 3, 2, ceil_mode=True)
        s = F.relu(self.squeeze(x))
        x = torch.cat([F.relu(self.e1(s)), F.relu(self.e3(s))], 1)
        return torch.flatten(F.adaptive_avg_pool2d(F.relu(self.classifier(x)), (1, 1)), 1)


class Gated(nn.Module):  # chunk (Split), F.normalize (ReduceL2), torch.where (Greater, Where), clamp
    def __init__(self):
        super().__init__()
        self.fc, self.head = nn.Linear(784, 64), nn.Linear(32, 10)

    def forward(self, x):
        a, b = self.fc(x.flatten(1)).chunk(2, dim=1)
        x = F.normalize(a * torch.sigmoid(b), dim=1)
        return F.log_softmax(self.head(torch.where(x > 0, x, 0.1 * x).clamp(-1, 1)), 1)


class EinsumAttention(nn.Module):  # attention written with torch.einsum (Einsum nodes), a pooled einsum head
    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(1, 24, 4, 4)
        self.qkv = nn.Linear(24, 72)
        self.score = nn.Parameter(torch.randn(24))
        self.head = nn.Linear(24, 10)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)  # [b, 49, 24]
        b, n, _ = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, 3, 8).permute(2, 0, 3, 1, 4)
        a = torch.einsum("bhid,bhjd->bhij", q, k).softmax(-1)
        x = x + torch.einsum("bhij,bhjd->bhid", a, v).transpose(1, 2).reshape(b, n, 24)
        w = torch.einsum("bnc,c->bn", x, self.score).softmax(-1)  # attention pooling
        return self.head(torch.einsum("bn,bnc->bc", w, x))


MODELS = {"vit": (ViT, [1, 28, 28]), "attention": (Attention, [1, 28, 28]), "convnext": (ConvNeXt, [1, 28, 28]),
          "squeeze_excite": (SqueezeExcite, [1, 28, 28]), "groupnorm_silu": (GroupNormSiLU, [1, 28, 28]),
          "sequence1d": (Sequence1d, [28, 28]), "densenet": (DenseNet, [1, 28, 28]),
          "squeezenet": (SqueezeNet, [1, 28, 28]), "gated": (Gated, [1, 28, 28]),
          "einsum_attention": (EinsumAttention, [1, 28, 28])}


def build(name):
    torch.manual_seed(sum(map(ord, name)))
    model = MODELS[name][0]()
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d, nn.GroupNorm, nn.LayerNorm)):
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)
    return model.eval()


def main():
    if sys.argv[1] == "names":
        for name, (_, shape) in MODELS.items():
            print(name, ",".join(map(str, shape)))
    elif sys.argv[1] == "export":
        for name, (_, shape) in MODELS.items():
            for opset in (13, 17):
                torch.onnx.export(build(name), torch.zeros([2] + shape), f"{sys.argv[2]}/{name}.opset{opset}.onnx",
                                  opset_version=opset, input_names=["input"], output_names=["output"],
                                  dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    else:
        import h5py
        with h5py.File(sys.argv[3]) as f:
            images = torch.from_numpy(f["images"][...].astype(np.float32) / np.float32(255))  # [N, 28, 28, 1]
        for name, (_, shape) in MODELS.items():
            x = images.permute(0, 3, 1, 2).contiguous() if shape[0] == 1 else images.reshape(-1, *shape)
            with torch.no_grad():
                y = build(name)(x)
            p = torch.exp(y) if name == "gated" else torch.softmax(y, dim=1)
            np.save(f"{sys.argv[2]}/{name}.torch.npy", p.numpy())


if __name__ == "__main__":
    main()
