"""relational_jax: edge-centric transformers for algorithmic and compositional reasoning."""

import setuptools

setuptools.setup(
    name="relational_jax",
    version="0.1.0",
    description=(
        "Relational Transformer, Edge Transformer and friends in JAX/Flax, "
        "as CLRS processors and seq2seq models."
    ),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=setuptools.find_packages(
        include=["relational_jax*", "processors*", "experiments*"]
    ),
    install_requires=[
        "jax>=0.4.31",
        "flax>=0.8.5",
        "optax>=0.2.3",
        "dm-clrs>=2.0.3,<2.1",  # processors.CarryNet re-implements Net._one_step_pred.
        "dm-haiku>=0.0.12",
        "chex>=0.1.86",
        "orbax-checkpoint>=0.6.0",
        "absl-py>=2.1.0",
        "ml-collections>=0.1.1",  # ConfigDict: relational_jax.training.config
        "numpy>=1.26",
        "tqdm>=4.66",
        "matplotlib>=3.8",
    ],
    # The official data files the tasks read by default (with their
    # licences: relational_jax/data/official/README.md).
    package_data={
        "relational_jax.data": [
            "official/README.md",
            "official/*/LICENSE",
            "official/*/*.txt",
            "official/*/*.tsv",
            "official/*/*/*.csv",
            "official/*/*/*.tsv",
            "official/*/*/*.txt",
        ]
    },
    extras_require={
        # train.tensorboard=True: TensorBoard event files, without TensorFlow.
        "tensorboard": ["tensorboardX>=2.6"],
        "test": [
            "pytest>=8.0",
            "pytest-xdist>=3.5",  # -n auto: one test process per core
            "tensorboardX>=2.6",
            "pyink>=24.3",
        ],
    },
)
