"""The sentence a person reads when a request fails, in the request's language.

A ServiceError's `message` is English, one per class; a question asked in French (its `lang`,
or the question's own words: service.text.language) gets the French sentence of the nearest
class that has one. Labels (`ragNoFileFound`...) and reasons stay as they are: a search UI
translates labels itself, and reasons are for the operator.
"""

from __future__ import annotations

import re

from service.errors import (
    AgentNotFound,
    BadRequest,
    BodyTimeout,
    ConversationNotFound,
    DocumentNotFound,
    EmptyDocument,
    FeatureDisabled,
    ModelNotServed,
    NoDocumentFound,
    NotFound,
    NoValidAnswer,
    Overloaded,
    PayloadTooLarge,
    ServiceError,
    SummarySourceNotFound,
    Unauthorized,
)

FRENCH: dict[type[ServiceError], str] = {
    ServiceError: (
        "Désolé, j'ai rencontré un problème technique. Veuillez réessayer plus tard ; si le "
        "problème persiste, contactez un administrateur."
    ),
    FeatureDisabled: "Désolé, cette fonctionnalité n'est pas activée.",
    Unauthorized: "Désolé, cette action demande un jeton valide.",
    BadRequest: (
        "Désolé, la requête semble poser un problème. Vérifiez votre question et réessayez."
    ),
    NotFound: "Désolé, il n'y a rien à cette adresse.",
    AgentNotFound: "Désolé, cet agent n'existe pas ou n'est pas disponible.",
    ConversationNotFound: "Désolé, cette conversation n'existe pas ou n'est plus disponible.",
    PayloadTooLarge: "Désolé, ce que vous avez envoyé est trop volumineux.",
    BodyTimeout: "Désolé, votre requête est arrivée trop lentement.",
    ModelNotServed: "Désolé, le modèle demandé n'est pas disponible.",
    NoDocumentFound: (
        "Désolé, je n'ai trouvé aucun document pertinent pour répondre à votre demande."
    ),
    DocumentNotFound: "Désolé, le fichier demandé n'existe pas ou n'est pas disponible.",
    SummarySourceNotFound: "Désolé, le fichier demandé n'existe pas ou n'est pas disponible.",
    EmptyDocument: "Désolé, le fichier demandé est vide : il n'y a rien à résumer.",
    NoValidAnswer: "Désolé, je n'ai pas trouvé de réponse à votre question.",
    Overloaded: (
        "Désolé, trop de questions sont en cours de traitement. Veuillez réessayer dans un instant."
    ),
}
MESSAGES = {"fr": FRENCH}


def user_message(error: ServiceError, language: str | None) -> str:
    """The error's sentence for a person who asked in `language` ('fr', 'fr-CA'): the
    class's own English one when the language has none, or the class's is its own (a
    subclass with a sentence of its own that is not translated keeps it)."""
    table = MESSAGES.get(re.split(r"[-_]", language or "")[0].lower())
    if table is None:
        return error.message
    for kind in type(error).__mro__:
        if kind in table:
            return table[kind]
        if "message" in vars(kind):  # an English sentence of its own, not translated
            return error.message
    return error.message
