"""The tiny offline model loads through the real transformers code path and generates."""

from __future__ import annotations


def test_tiny_model_loads_and_generates(tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert tok.eos_token == "<|im_end|>"
    assert tok.pad_token == "<pad>"
    # "\n" is always a single token, never merged with text (the token-to-rank map relies on it).
    ids = tok("Arrival (2016)\nMoon (2009)\n\nContact", add_special_tokens=False)["input_ids"]
    pieces = [tok.decode([i]) for i in ids]
    assert all(p == "\n" or "\n" not in p for p in pieces)
    assert pieces.count("\n") == 3
    text = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    enc = tok(text, return_tensors="pt")
    torch.manual_seed(0)
    out = model.generate(**enc, max_new_tokens=5, do_sample=False)
    assert out.shape[1] == enc["input_ids"].shape[1] + 5 or out[0, -1].item() == tok.eos_token_id
    n_params = sum(p.numel() for p in model.parameters())
    assert 10_000 < n_params < 500_000
