"""(b) The same in Kiln's Pythonic style: build, run on a photo, top-5, latency.

    python3 examples/pythonic_resnet101.py [models/resnet101.onnx] [size]
"""
import sys

import kiln

import common

model, size = (sys.argv[1:] + ["models/resnet101.onnx"])[0], int((sys.argv[2:] + ["224"])[0])
common.export("resnet101", model, size)  # no-op when the file exists
engine = kiln.build(model, precision="fp16", shapes={"input": (1, 3, size, size)})
logits = engine(common.photo(size=size))
print("top-5:", common.top5(logits))
print("latency (ms):", kiln.bench(engine, iterations=20)["latency_ms"])
