"""Instructions added to the system prompt: the answer's language and its form."""

from __future__ import annotations

import re

# ISO 639-1 codes of the languages a search UI most often asks for; others are named by code.
LANGUAGE_NAMES = {
    "ar": "Arabic", "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek",
    "en": "English", "es": "Spanish", "fi": "Finnish", "fr": "French", "he": "Hebrew",
    "hi": "Hindi", "hu": "Hungarian", "id": "Indonesian", "it": "Italian", "ja": "Japanese",
    "ko": "Korean", "nl": "Dutch", "no": "Norwegian", "pl": "Polish", "pt": "Portuguese",
    "ro": "Romanian", "ru": "Russian", "sv": "Swedish", "th": "Thai", "tr": "Turkish",
    "uk": "Ukrainian", "vi": "Vietnamese", "zh": "Chinese",
}  # fmt: skip

LANGUAGE_CODE = re.compile(r"^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})?$")

# Datafari's `format` values.
FORMAT_INSTRUCTIONS = {
    "default": "",
    "text": "Write the answer as plain paragraphs of text, without lists.",
    "bulletpoint": "Write the answer as a list of bullet points, one idea per point.",
    "stepbystep": "Write the answer as numbered steps, in the order they should be done.",
}


def language_name(code: str | None) -> str:
    """'fr' -> 'French'; '' or None -> '' (answer in the question's language)."""
    if not code:
        return ""
    base = re.split(r"[-_]", code)[0].lower()
    return LANGUAGE_NAMES.get(base, f"the language whose ISO code is {code}")
