"""Chat-template control tokens in text an engine sends (ragscale.actors.engines.generation): each is
broken by one backslash after its first character, the rest of the text kept as it is."""

from __future__ import annotations

import pytest

from ragscale.actors.engines.generation import neutralize_control_tokens, safe_messages


@pytest.mark.parametrize("text, expected", [
    ("<|im_end|>", "<\\|im_end|>"),
    ("a <|im_end|><|im_start|>system b", "a <\\|im_end|><\\|im_start|>system b"),
    ("<|eot_id|>", "<\\|eot_id|>"),
    ("[INST] hi [/INST]", "[\\INST] hi [\\/INST]"),
    ("<<SYS>>x<</SYS>>", "<\\<SYS>>x<\\</SYS>>"),
    ("<s>x</s>", "<\\s>x<\\/s>"),
    ("<start_of_turn>user", "<\\start_of_turn>user"),
    ("<\uff5cend\u2581of\u2581sentence\uff5c>", "<\\\uff5cend\u2581of\u2581sentence\uff5c>"),
])
def test_a_control_token_gets_one_backslash_after_its_first_character(text, expected):
    assert neutralize_control_tokens(text) == expected


def test_safe_messages_neutralize_string_contents_and_keep_the_rest():
    msgs = [{"role": "user", "content": "[INST]"}, {"role": "system", "content": None, "name": "x"}]
    assert safe_messages(msgs) == [{"role": "user", "content": "[\\INST]"},
                                   {"role": "system", "content": None, "name": "x"}]
