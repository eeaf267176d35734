"""Request field types shared by the endpoints: a document id and a language code."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, StringConstraints

from service.chains.prompts import LANGUAGE_CODE

# Any printable text up to 512 characters: ids are paths and URLs; no control characters.
DocumentId = Annotated[str, StringConstraints(pattern=r"^[^\x00-\x1f\x7f]{1,512}$")]

# ISO 639 code, optionally with a region: "fr", "pt-BR", "zh_TW".
LanguageCode = Annotated[str, StringConstraints(pattern=LANGUAGE_CODE.pattern)]

# Datafari sends "lang": "" for "no language chosen": the default language, like no field.
OptionalLanguage = Annotated[
    LanguageCode | None, BeforeValidator(lambda value: None if value == "" else value)
]

# A query-string value: at most this many characters, so that even 4-byte characters, percent-
# encoded (12 bytes each), keep a URL inside the HTTP server's request-line limit (uvicorn
# answers a longer one itself, in plain text). Questions longer than this go in a POST body.
MAX_QUERY_CHARS = 20_000  # a question
MAX_HISTORY_MESSAGES = 100  # earlier messages sent with it
MAX_MESSAGE_CHARS = 20_000  # one of them
MAX_QUERY_PARAM = 1000
