"""fairseq-stream: fast NMT decoding strategies for fairseq, loaded with --user-dir fairseq_stream.

Install with ``bash scripts/install.sh`` (it installs the build requirements of fairseq
before fairseq itself, which must be built without build isolation).
"""
import glob

from setuptools import find_packages, setup

setup(
    name="fairseq-stream",
    version="0.1.0",
    description="Streaming beam search, fused output layer, Jacobi decoding and IBDecoder for fairseq",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["fairseq_stream", "fairseq_stream.*"]),
    package_data={"fairseq_stream.ops": ["csrc/*.cpp", "csrc/*.h"]},
    # The demo files, installed once under <prefix>/share (fairseq_stream/tools/demo_files.py finds them).
    data_files=[("share/fairseq-stream/demo", sorted(glob.glob("user_dir_examples/demo/*")))],
    install_requires=[
        "torch==2.13.0",
        # fairseq 0.12.2 does not import on Python 3.11; fairseq-fixed provides the same module.
        "fairseq-fixed==0.12.3.1",
        "sacremoses==0.2.0",
        "subword-nmt==0.3.8",
        "sacrebleu==2.6.0",
        "ninja==1.13.2",  # builds the CPU output-layer kernel on first use
    ],
    extras_require={
        "dev": ["pytest==9.2.0", "pytest-xdist==3.8.0", "hypothesis==6.170.15", "triton==3.9.0"],  # Triton: the GPU kernels, tested on a CPU by its interpreter
        "gpu": ["triton"],  # the version that comes with your CUDA build of torch
        "plots": ["matplotlib==3.10.8"],
        "bench": ["ctranslate2==4.8.5"],  # scripts/bench/bench_vs_ctranslate2.py
    },
    entry_points={
        "console_scripts": [
            "fairseq-stream-bench=fairseq_stream.tools.bench:main",
            "fairseq-stream-frontier=fairseq_stream.tools.frontier:main",
            "fairseq-stream-demo=fairseq_stream.tools.demo:main",
            "fairseq-stream-shard=fairseq_stream.tools.shard:main",
            "fairseq-stream-ddgviz=fairseq_stream.tools.ddgviz:main",
        ]
    },
)
