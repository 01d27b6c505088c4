"""One training step of a small ResNet (examples/train_resnet.py's make_resnet: a 3x3 stem, three stages of one
BasicBlock of widths 16/32/64, the second and third strided with a 1x1-conv downsample, BatchNorm, ReLU, residual
adds, global average pooling, a linear head), batch 64, 3x16x16 float32 images, 10 classes, cross-entropy, SGD
with momentum.

The bench is bench_cnn_step.py's (sgd_step_bench) with this model: the same systems, starting weights and
checks before timing.

    python benches/bench_resnet_step.py [--quick]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from bench_cnn_step import CLASSES, sgd_step_bench  # noqa: E402
from train_resnet import make_resnet  # noqa: E402


def make_model(lib):
    return make_resnet(lib.nn, classes=CLASSES)


def run(quick=False):
    return sgd_step_bench("resnet_step", make_model, 3, quick)


if __name__ == "__main__":
    from tracejit.bench import print_table
    print_table(run(quick="--quick" in sys.argv))
