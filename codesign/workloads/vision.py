"""Image classifiers: ResNet (He et al., CVPR'16) and VGG (Simonyan & Zisserman, ICLR'15).

ResNet follows He et al. Table 1: a 7x7/2 stem with 64 channels, 3x3/2 max pooling,
four stages of bottleneck blocks (1x1, 3x3, 1x1, expansion 4; widths 64, 128, 256,
512) with a 1x1 projection on the first block of each stage, global average pooling
and a 1000-way fully connected layer.  ``variant="v1.5"`` (torchvision, MLPerf)
puts a stage's stride 2 on the 3x3 convolution, ``"v1"`` (the paper) on the first
1x1; parameters are identical, v1.5 costs 4.09 G MACs per 224x224 image for
ResNet-50 against the paper's 3.8 G.  Every convolution is followed by batch norm,
folded into the convolution layer.  Basic-block ResNets (18/34) are also built.

VGG follows configuration D (VGG-16) / E (VGG-19) of Simonyan & Zisserman Table 1:
3x3 convolutions with padding 1 and bias, 2x2/2 max pooling, three fully connected
layers 4096-4096-classes.
"""

from __future__ import annotations

from codesign.workloads.layers import conv2d, dense, pool2d
from codesign.workloads.model import Layer
from codesign.workloads.params import Param

__all__ = ["build_resnet", "build_vgg", "RESNET_PARAMS", "VGG_PARAMS"]

_RESNET_BLOCKS = {18: (2, 2, 2, 2), 34: (3, 4, 6, 3), 50: (3, 4, 6, 3), 101: (3, 4, 23, 3),
                  152: (3, 8, 36, 3)}
_VGG_CONVS = {11: (1, 1, 2, 2, 2), 13: (2, 2, 2, 2, 2), 16: (2, 2, 3, 3, 3),
              19: (2, 2, 4, 4, 4)}

RESNET_PARAMS = {
    "depth": Param("choice", "50", choices=tuple(str(k) for k in _RESNET_BLOCKS),
                   doc="ResNet depth"),
    "variant": Param("choice", "v1.5", choices=("v1", "v1.5"),
                     doc="where a stage's stride-2 sits: v1 first 1x1, v1.5 the 3x3"),
    "image_size": Param("int", 224, minimum=32, maximum=4096, doc="input height = width"),
    "classes": Param("int", 1000, minimum=1, maximum=10**6),
    "dtype_bytes": Param("int", 2, minimum=1, maximum=8),
}

VGG_PARAMS = {
    "depth": Param("choice", "16", choices=tuple(str(k) for k in _VGG_CONVS)),
    "image_size": Param("int", 224, minimum=32, maximum=4096),
    "classes": Param("int", 1000, minimum=1, maximum=10**6),
    "dtype_bytes": Param("int", 2, minimum=1, maximum=8),
}


def build_resnet(*, depth: str, variant: str, image_size: int, classes: int,
                 dtype_bytes: int) -> list[Layer]:
    """Layers of a ResNet (see the module docstring)."""
    d = dtype_bytes
    depth_i = int(depth)
    bottleneck = depth_i >= 50
    layers: list[Layer] = []
    stem, h, w = conv2d("conv1", 3, 64, 7, height=image_size, width=image_size, stride=2,
                        padding=3, dtype_bytes=d)
    layers.append(stem)
    pool, h, w = pool2d("maxpool", 64, height=h, width=w, kernel=3, stride=2, padding=1,
                        dtype_bytes=d)
    layers.append(pool)
    c_in = 64
    for stage, (blocks, width) in enumerate(zip(_RESNET_BLOCKS[depth_i], (64, 128, 256, 512))):
        c_out = width * 4 if bottleneck else width
        for b in range(blocks):
            stride = 2 if (b == 0 and stage > 0) else 1
            prefix = f"conv{stage + 2}_{b + 1}"
            h_in, w_in = h, w
            if bottleneck:
                s1, s3 = (stride, 1) if variant == "v1" else (1, stride)
                la, h1, w1 = conv2d(f"{prefix}.a", c_in, width, 1, height=h_in, width=w_in,
                                    stride=s1, dtype_bytes=d)
                lb, h2, w2 = conv2d(f"{prefix}.b", width, width, 3, height=h1, width=w1,
                                    stride=s3, padding=1, dtype_bytes=d)
                lc, h, w = conv2d(f"{prefix}.c", width, c_out, 1, height=h2, width=w2,
                                  dtype_bytes=d)
                block = [la, lb, lc]
            else:
                la, h1, w1 = conv2d(f"{prefix}.a", c_in, width, 3, height=h_in, width=w_in,
                                    stride=stride, padding=1, dtype_bytes=d)
                lb, h, w = conv2d(f"{prefix}.b", width, width, 3, height=h1, width=w1,
                                  padding=1, dtype_bytes=d)
                block = [la, lb]
            if b == 0 and (stride != 1 or c_in != c_out):
                proj, _, _ = conv2d(f"{prefix}.proj", c_in, c_out, 1, height=h_in,
                                    width=w_in, stride=stride, dtype_bytes=d)
                block.insert(0, proj)
            layers.extend(block)
            c_in = c_out
    gap, _, _ = pool2d("avgpool", c_in, height=h, width=w, kernel=h, stride=h, dtype_bytes=d)
    layers.append(gap)
    layers.append(dense("fc", c_in, classes, dtype_bytes=d))
    return layers


def build_vgg(*, depth: str, image_size: int, classes: int, dtype_bytes: int) -> list[Layer]:
    """Layers of a VGG network (see the module docstring)."""
    d = dtype_bytes
    layers: list[Layer] = []
    h = w = image_size
    c_in = 3
    for stage, (convs, width) in enumerate(zip(_VGG_CONVS[int(depth)],
                                               (64, 128, 256, 512, 512))):
        for i in range(convs):
            layer, h, w = conv2d(f"conv{stage + 1}_{i + 1}", c_in, width, 3, height=h, width=w,
                                 padding=1, bias=True, batchnorm=False, dtype_bytes=d)
            layers.append(layer)
            c_in = width
        pool, h, w = pool2d(f"pool{stage + 1}", c_in, height=h, width=w, kernel=2, stride=2,
                            dtype_bytes=d)
        layers.append(pool)
    layers.append(dense("fc6", c_in * h * w, 4096, dtype_bytes=d))
    layers.append(dense("fc7", 4096, 4096, dtype_bytes=d))
    layers.append(dense("fc8", 4096, classes, dtype_bytes=d))
    return layers
