"""Classifiers exported the ways users export them beside the documented one: torch.onnx.export
without dynamic_axes (the batch of the example input fixed in the file, and, where the model
writes x.reshape(x.size(0), -1), fixed in a Reshape too), with dynamic height and width (a fully
convolutional net), several outputs (the logits second, read by name), a [batch, 1, classes] output, LocalResponseNorm (an If and a 3-D pool in the export), uint8
images scaled inside the graph, F.interpolate (nearest, bilinear, bicubic), transposed convolutions, a float16 model, Conv3d and
MaxPool3d, PixelShuffle / PixelUnshuffle, torch.std / var (int64 shape arithmetic), F.grid_sample
(opset 16), max_pool2d's indices, boolean-mask indexing; and PyTorch's outputs.

  torch_export_styles.py names                 one line per model: NAME
  torch_export_styles.py export DIR            writes DIR/NAME.onnx
  torch_export_styles.py outputs DIR DATA      writes DIR/NAME.torch.npy: probabilities [N, C]"""
import sys
import numpy as np
import torch
from torch import nn

from torch_models import seeded


class ViewNet(nn.Module):  # NCHW [N, 1, 28, 28]; the batch read by x.size(0): a Reshape [batch, -1]
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(1, 8, 3, padding=1), nn.Conv2d(8, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16 * 7 * 7, 10)

    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.c1(x)), 2)
        x = nn.functional.max_pool2d(torch.relu(self.bn(self.c2(x))), 2)
        return self.fc(x.reshape(x.size(0), -1))


class FlattenNet(ViewNet):  # the same weights' kind, flattened by torch.flatten: no batch in the graph
    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.c1(x)), 2)
        x = nn.functional.max_pool2d(torch.relu(self.bn(self.c2(x))), 2)
        return self.fc(torch.flatten(x, 1))


class TokenOutput(FlattenNet):  # [batch, 1, classes]: a class token's logits kept as a sequence of one
    def forward(self, x):
        return super().forward(x).unsqueeze(1)


class TwoOutputs(ViewNet):  # (logits, embedding): eval reads the first output
    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.c1(x)), 2)
        e = torch.flatten(nn.functional.max_pool2d(torch.relu(self.bn(self.c2(x))), 2), 1)
        return self.fc(e), e


class LogitsSecond(ViewNet):  # (embedding, logits, an auxiliary head): eval is told to read 'logits'
    def __init__(self):
        super().__init__()
        self.aux = nn.Linear(16 * 7 * 7, 5)

    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.c1(x)), 2)
        e = torch.flatten(nn.functional.max_pool2d(torch.relu(self.bn(self.c2(x))), 2), 1)
        return e, self.fc(e), torch.log_softmax(self.aux(torch.tanh(e)), dim=1)


class KerasStyle(nn.Module):  # NHWC input [N, 28, 28, 1] as Keras models take it, a batch of 32 fixed
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(1, 6, 5)
        self.fc = nn.Linear(6 * 12 * 12, 10)

    def forward(self, x):
        x = nn.functional.avg_pool2d(torch.tanh(self.c(x.permute(0, 3, 1, 2))), 2)
        return torch.softmax(self.fc(x.reshape(x.shape[0], -1)), dim=1)


class Lrn(nn.Module):  # LocalResponseNorm: PyTorch exports an If on a shape and a 3-D AveragePool
    def __init__(self):
        super().__init__()
        self.c, self.lrn, self.fc = nn.Conv2d(1, 6, 5, stride=2), nn.LocalResponseNorm(3), nn.Linear(6 * 12 * 12, 10)

    def forward(self, x):
        return torch.log_softmax(self.fc(self.lrn(torch.relu(self.c(x))).flatten(1)), dim=1)


class Uint8Images(nn.Module):  # uint8 NHWC images in, scaled and normalised inside the graph
    def __init__(self):
        super().__init__()
        self.c, self.fc = nn.Conv2d(1, 6, 5, stride=2), nn.Linear(6 * 12 * 12, 10)

    def forward(self, x):
        x = (x.permute(0, 3, 1, 2).float() / 255 - 0.2860) / 0.3530
        return self.fc(torch.relu(self.c(x)).flatten(1))


class Interpolate(nn.Module):  # F.interpolate as users resize inside a classifier: Resize nodes
    def __init__(self):
        super().__init__()
        self.c1, self.c2, self.fc = nn.Conv2d(1, 4, 3, padding=1), nn.Conv2d(4, 4, 3, padding=1), nn.Linear(4 * 10 * 10, 10)

    def forward(self, x):
        x = torch.relu(self.c1(nn.functional.interpolate(x, scale_factor=2, mode="nearest")))
        x = nn.functional.interpolate(x, size=(20, 20), mode="bilinear", align_corners=False)
        x = torch.relu(self.c2(x))
        x = nn.functional.interpolate(x, size=(10, 10), mode="bicubic", align_corners=True)
        return self.fc(x.flatten(1))


class Transposed(nn.Module):  # ConvTranspose2d: strided with output_padding, grouped and dilated; ConvTranspose1d
    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(1, 4, 3, stride=2, padding=1)
        self.up = nn.ConvTranspose2d(4, 4, 3, stride=2, padding=1, output_padding=1, groups=2)
        self.wide = nn.ConvTranspose2d(4, 2, 2, dilation=2, bias=False)
        self.line = nn.ConvTranspose1d(2, 2, 3, stride=3)
        self.fc = nn.Linear(2 * 30 * 90, 10)

    def forward(self, x):
        x = self.wide(torch.relu(self.up(torch.relu(self.down(x)))))  # [N, 2, 30, 30]
        x = self.line(x.flatten(2)[:, :, :30])  # [N, 2, 90]
        return self.fc(torch.cat([x] * 30, dim=1).flatten(1))


class Float16(nn.Module):  # exported, then made a float16 model (weights, input, output: to_float16)
    def __init__(self):
        super().__init__()
        self.c, self.fc = nn.Conv2d(1, 6, 5), nn.Linear(6 * 12 * 12, 10)

    def forward(self, x):
        return torch.softmax(self.fc(nn.functional.max_pool2d(torch.relu(self.c(x)), 2).flatten(1)) * 0.5, dim=1)


def to_float16(path):
    """The model as a float16 one: its float weights, constants, input and output float16."""
    import onnx
    from onnx import numpy_helper, TensorProto as T
    m = onnx.load(path)
    half = lambda t: t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))
    for t in m.graph.initializer:
        if t.data_type == T.FLOAT:
            half(t)
    for node in m.graph.node:
        for a in node.attribute:
            if node.op_type == "Constant" and a.t.data_type == T.FLOAT:
                half(a.t)
            if node.op_type == "Cast" and a.name == "to" and a.i == T.FLOAT:
                a.i = T.FLOAT16
    for v in list(m.graph.input) + list(m.graph.output):
        v.type.tensor_type.elem_type = T.FLOAT16
    onnx.save(m, path)


class Volume(nn.Module):  # Conv3d (strided, padded, dilated, grouped) and MaxPool3d over the image as a volume
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv3d(1, 4, (2, 3, 3), stride=(1, 2, 1), padding=(1, 1, 0), dilation=(1, 1, 2))
        self.c2 = nn.Conv3d(4, 4, 3, padding=1, groups=2, bias=False)
        self.fc = nn.Linear(4 * 3 * 2 * 12, 10)

    def forward(self, x):
        x = torch.relu(self.c1(x.reshape(-1, 1, 4, 7, 28)))  # [N, 4, 5, 3, 24]
        x = nn.functional.max_pool3d(torch.relu(self.c2(x)), 2, ceil_mode=True)  # [N, 4, 3, 2, 12]
        return self.fc(x.flatten(1))


class FullyConv(nn.Module):  # any height and width: global pooling before the classes
    def __init__(self, channels=1):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(channels, 8, 3, padding=1), nn.Conv2d(8, 10, 3, stride=2)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        y = self.c2(torch.relu(self.bn(self.c1(x))))
        return nn.functional.adaptive_avg_pool2d(y, 1).flatten(1)


class FullyConvRgb(FullyConv):
    def __init__(self):
        super().__init__(3)


class PixelShuffle(nn.Module):  # PixelUnshuffle and PixelShuffle (SpaceToDepth, DepthToSpace CRD) around a conv
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(4, 16, 3, padding=1), nn.Conv2d(4, 4, 3, stride=2)
        self.fc = nn.Linear(4 * 13 * 13, 10)

    def forward(self, x):
        x = nn.functional.pixel_shuffle(torch.relu(self.c1(nn.functional.pixel_unshuffle(x, 2))), 2)  # [N, 4, 28, 28]
        return self.fc(torch.relu(self.c2(x)).flatten(1))


class Standardize(nn.Module):  # torch.std / torch.var / var_mean: the element count as int64 shape arithmetic
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(1, 6, 3, padding=1)
        self.fc = nn.Linear(6 * 14 * 14, 10)

    def forward(self, x):
        x = (x - x.mean((2, 3), keepdim=True)) / (x.std((2, 3), keepdim=True) + 1e-3)
        y = self.c(x)
        var, mean = torch.var_mean(y, dim=1, keepdim=True, unbiased=False)
        y = (y - mean) * torch.rsqrt(var + 1e-3) + y.var(dim=(2, 3), keepdim=True)
        return self.fc(nn.functional.max_pool2d(y, 2).flatten(1))


class Sampled(nn.Module):  # F.grid_sample at offsets a small net predicts (a spatial transformer's sampling)
    def __init__(self, mode, padding, align):
        super().__init__()
        self.mode, self.padding, self.align = mode, padding, align
        self.loc = nn.Conv2d(1, 2, 5, stride=4)  # [N, 2, 6, 6]: a grid of 6x6 points
        self.base = nn.Parameter(torch.rand(1, 12, 12, 2) * 2.4 - 1.2)  # reaches past [-1, 1]
        self.fc = nn.Linear(12 * 12, 10)

    def forward(self, x):
        offset = nn.functional.interpolate(torch.tanh(self.loc(x)), size=(12, 12), mode="nearest").permute(0, 2, 3, 1)
        y = nn.functional.grid_sample(x, self.base + 0.3 * offset, mode=self.mode, padding_mode=self.padding,
                                      align_corners=self.align)
        return self.fc(y.flatten(1))


class SampledBilinear(Sampled):
    def __init__(self):
        super().__init__("bilinear", "zeros", False)


class SampledNearest(Sampled):
    def __init__(self):
        super().__init__("nearest", "border", True)


class SampledBicubic(Sampled):
    def __init__(self):
        super().__init__("bicubic", "reflection", False)


class PoolIndices(nn.Module):  # max_pool2d's indices used (as PyTorch 2's exporter writes every max_pool2d)
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(1, 4, 3, padding=1)
        self.fc = nn.Linear(8 * 14 * 14, 10)

    def forward(self, x):
        v, i = nn.functional.max_pool2d(self.c(x), 2, return_indices=True)
        return self.fc(torch.cat([v, (i % 7).float() * 0.1], 1).flatten(1))


class MaskSelect(nn.Module):  # a fixed feature selection by a boolean mask buffer (NonZero, folded at load)
    def __init__(self):
        super().__init__()
        self.register_buffer("keep", torch.arange(784) % 3 != 1)
        self.fc = nn.Linear(int(self.keep.sum()), 10)

    def forward(self, x):
        return self.fc(torch.relu(x.flatten(1)[:, self.keep]))


# name: (class, example input batch, input shape without the batch, the input's dynamic axes)
BATCH, HW = {0: "batch"}, {0: "batch", 2: "height", 3: "width"}
MODELS = {
    "view_batch1": (ViewNet, 1, [1, 28, 28], None),
    "view_batch64": (ViewNet, 64, [1, 28, 28], None),
    "flatten_batch8": (FlattenNet, 8, [1, 28, 28], None),
    "two_outputs": (TwoOutputs, 1, [1, 28, 28], BATCH),
    "token_output": (TokenOutput, 2, [1, 28, 28], BATCH),
    "logits_second": (LogitsSecond, 2, [1, 28, 28], BATCH),
    "keras_batch32": (KerasStyle, 32, [28, 28, 1], None),
    "dynamic_hw": (FullyConv, 2, [1, 32, 32], HW),
    "lrn": (Lrn, 2, [1, 28, 28], BATCH),
    "uint8_images": (Uint8Images, 2, [28, 28, 1], BATCH),
    "interpolate": (Interpolate, 2, [1, 28, 28], BATCH),
    "transposed": (Transposed, 2, [1, 28, 28], BATCH),
    "float16": (Float16, 2, [1, 28, 28], BATCH),
    "volume": (Volume, 2, [1, 28, 28], BATCH),
    "rgb_dynamic_hw": (FullyConvRgb, 2, [3, 32, 32], HW),  # for 1-channel images: refused
    "pixel_shuffle": (PixelShuffle, 2, [1, 28, 28], BATCH),
    "standardize": (Standardize, 2, [1, 28, 28], BATCH),
    "grid_sample_bilinear": (SampledBilinear, 2, [1, 28, 28], BATCH),
    "grid_sample_nearest": (SampledNearest, 2, [1, 28, 28], BATCH),
    "grid_sample_bicubic": (SampledBicubic, 2, [1, 28, 28], BATCH),
    "pool_indices": (PoolIndices, 2, [1, 28, 28], BATCH),
    "mask_select": (MaskSelect, 2, [1, 28, 28], BATCH),
}


def build(name):
    return seeded(name, MODELS[name][0])


def main():
    if sys.argv[1] == "names":
        print("\n".join(MODELS))
    elif sys.argv[1] == "export":
        for name, (_, batch, shape, dynamic) in MODELS.items():
            outputs = {"two_outputs": ["logits", "embedding"], "logits_second": ["embedding", "logits", "aux"]}.get(
                name, ["output"])
            axes = {"input": dynamic, **{o: {0: "batch"} for o in outputs}} if dynamic else None
            example = torch.zeros([batch] + shape, dtype=torch.uint8 if name == "uint8_images" else torch.float32)
            torch.onnx.export(build(name), example, f"{sys.argv[2]}/{name}.onnx",
                              opset_version=16 if name.startswith("grid_sample") else 13,
                              input_names=["input"], output_names=outputs, dynamic_axes=axes)
            if name == "float16":
                to_float16(f"{sys.argv[2]}/{name}.onnx")
    else:
        import h5py
        with h5py.File(sys.argv[3]) as f:
            stored = torch.from_numpy(f["images"][...])  # uint8 [N, 28, 28, 1]
            images = stored.float() / 255
        for name, (_, _, shape, _) in MODELS.items():
            if shape[0] == 3:
                continue
            x = stored if name == "uint8_images" else images if shape[-1] == 1 else images.permute(0, 3, 1, 2).contiguous()
            model = build(name)
            if name == "float16":  # what the float16 file holds, computed in float32
                model, x = model.half().float(), x.half().float()
            with torch.no_grad():
                y = model(x)
                y = (y[1 if name == "logits_second" else 0] if isinstance(y, tuple) else y).reshape(len(x), -1)
                p = y if name in ("keras_batch32", "float16") else torch.exp(y) if name == "lrn" else torch.softmax(y, dim=1)
            np.save(f"{sys.argv[2]}/{name}.torch.npy", p.numpy())


if __name__ == "__main__":
    main()
