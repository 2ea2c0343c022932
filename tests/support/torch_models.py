"""Small classifiers of the kinds users train, exported the way users export them
(torch.onnx.export, opset 13, dynamic batch), and PyTorch's own outputs on a data file.

  torch_models.py export DIR          writes DIR/NAME.onnx per model (and a few at opsets 9, 11, 14, 17)
  torch_models.py outputs DIR DATA    writes DIR/NAME.torch.npy: probabilities [N, C] per model

Weights are PyTorch's initialisation with a fixed seed (BatchNorm's running statistics set to
non-trivial values), so the comparisons exercise every op without a training run."""
import sys
import numpy as np
import torch
from torch import nn


class LeNet(nn.Module):  # input NCHW [N, 1, 28, 28]
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


class Block(nn.Module):
    def __init__(self, c_in, c_out, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.skip = nn.Sequential()
        if stride != 1 or c_in != c_out:
            self.skip = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.skip(x))


class ResNet(nn.Module):  # input NCHW [N, 1, 28, 28]
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.blocks = nn.Sequential(Block(8, 8, 1), Block(8, 16, 2))
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class Mlp(nn.Module):  # input [N, 28, 28]; LayerNorm and GELU inside, LogSoftmax at the end
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(784, 64), nn.LayerNorm(64), nn.GELU(), nn.Dropout(0.1),
                                 nn.Linear(64, 10), nn.LogSoftmax(dim=1))

    def forward(self, x):
        return self.net(x)


class ChannelsLast(nn.Module):  # input NHWC [N, 28, 28, 1]; Concat, Sigmoid, AvgPool, Softmax
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(1, 4, 3, padding=1)
        self.b = nn.Conv2d(1, 4, 5, padding=2)
        self.pool = nn.AvgPool2d(2)
        self.fc = nn.Linear(8 * 14 * 14, 10)

    def forward(self, x):
        x = x.permute(0, 3, 1, 2)
        y = torch.sigmoid(torch.cat([self.a(x), self.b(x)], dim=1))
        return torch.softmax(self.fc(self.pool(y).reshape(y.shape[0], -1)), dim=1)


class Mobile(nn.Module):  # input NCHW [N, 1, 28, 28]; MobileNet-style: depthwise and grouped convolutions
    def __init__(self):  # of stride 2, ReLU6 (Clip), a padded 3x3 max-pool, Hardswish, Dropout, global pooling
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU6(),
                                  nn.MaxPool2d(3, 2, 1))
        self.dw = nn.Sequential(nn.Conv2d(16, 16, 3, 2, 1, groups=16, bias=False), nn.BatchNorm2d(16), nn.ReLU6(),
                                nn.Conv2d(16, 32, 1, bias=False), nn.BatchNorm2d(32), nn.Hardswish(),
                                nn.Conv2d(32, 32, 3, 1, 1, groups=4), nn.ReLU())
        self.head = nn.Sequential(nn.Dropout(0.2), nn.Linear(32, 10))

    def forward(self, x):
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(self.dw(self.stem(x)), 1), 1))


def sharpen(rnn, head):
    """Twice PyTorch's initial recurrent weights and ten times its head's: states that use the
    activations' range and probabilities far from uniform, so that the comparisons see errors."""
    with torch.no_grad():
        for p in rnn.parameters():
            p.mul_(2)
        head.weight.mul_(10)


class LstmLast(nn.Module):  # input [N, 28, 28]: the image's rows as a sequence; the last step's output classified
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(28, 32, batch_first=True)
        self.fc = nn.Linear(32, 10)
        sharpen(self.lstm, self.fc)

    def forward(self, x):
        return self.fc(self.lstm(x)[0][:, -1, :])


class BiGru(nn.Module):  # input [N, 28, 28]; a bidirectional 2-layer GRU, its last layer's h_n classified
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(28, 12, num_layers=2, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(24, 10)
        sharpen(self.gru, self.fc)

    def forward(self, x):
        h = self.gru(x)[1]
        return self.fc(torch.cat([h[-2], h[-1]], dim=1))


class ReluRnn(nn.Module):  # input [N, 28, 28]; an Elman RNN with ReLU, the last step's output classified
    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(28, 24, batch_first=True, nonlinearity="relu")
        self.fc = nn.Linear(24, 10)
        sharpen(self.rnn, self.fc)

    def forward(self, x):
        return self.fc(self.rnn(x)[0][:, -1, :])


MODELS = {"lenet": (LeNet, [1, 28, 28]), "resnet": (ResNet, [1, 28, 28]), "mlp": (Mlp, [28, 28]),
          "channels_last": (ChannelsLast, [28, 28, 1]), "mobile": (Mobile, [1, 28, 28]),
          "lstm": (LstmLast, [28, 28]), "gru": (BiGru, [28, 28]), "rnn": (ReluRnn, [28, 28])}


def seeded(name, cls):
    """cls() made after a seed from `name`, in eval mode, BatchNorm's statistics non-trivial."""
    torch.manual_seed(sum(map(ord, name)))
    model = cls()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)
    return model.eval()


def build(name):
    return seeded(name, MODELS[name][0])


def probabilities(name, model, x):
    with torch.no_grad():
        y = model(x)
    if name == "mlp":
        return torch.exp(y)
    if name == "channels_last":
        return y
    return torch.softmax(y, dim=1)


def main():
    if sys.argv[1] == "export":
        for name, (_, shape) in MODELS.items():
            model = build(name)
            torch.onnx.export(model, torch.zeros([2] + shape), f"{sys.argv[2]}/{name}.onnx", opset_version=13,
                              input_names=["input"], output_names=["output"],
                              dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
        # The MLP at opset 17 too, where PyTorch exports LayerNorm as one LayerNormalization node.
        torch.onnx.export(build("mlp"), torch.zeros([2] + MODELS["mlp"][1]), f"{sys.argv[2]}/mlp_opset17.onnx",
                          opset_version=17, input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
        # Opsets 9 and 11, which older tutorials pin (Upsample / Slice / pads as attributes, not inputs).
        for name, opset in (("lenet", 9), ("resnet", 9), ("gru", 9), ("mobile", 11), ("mlp", 11), ("lstm", 11)):
            torch.onnx.export(build(name), torch.zeros([2] + MODELS[name][1]), f"{sys.argv[2]}/{name}_opset{opset}.onnx",
                              opset_version=opset, input_names=["input"], output_names=["output"],
                              dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
        # The recurrent models at opset 14 too (ONNX's LSTM / GRU gained the layout attribute there).
        for name in ("lstm", "gru", "rnn"):
            torch.onnx.export(build(name), torch.zeros([2] + MODELS[name][1]), f"{sys.argv[2]}/{name}_opset14.onnx",
                              opset_version=14, input_names=["input"], output_names=["output"],
                              dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    else:
        import h5py
        with h5py.File(sys.argv[3]) as f:
            images = torch.from_numpy(f["images"][...].astype(np.float32) / np.float32(255))  # [N, 28, 28, 1]
        inputs = {"lenet": images.permute(0, 3, 1, 2), "resnet": images.permute(0, 3, 1, 2),
                  "mlp": images.reshape(-1, 28, 28), "channels_last": images, "mobile": images.permute(0, 3, 1, 2),
                  "lstm": images.reshape(-1, 28, 28), "gru": images.reshape(-1, 28, 28), "rnn": images.reshape(-1, 28, 28)}
        for name in MODELS:
            np.save(f"{sys.argv[2]}/{name}.torch.npy", probabilities(name, build(name), inputs[name]).numpy())


if __name__ == "__main__":
    main()
