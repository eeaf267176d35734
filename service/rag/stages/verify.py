"""Verify: before the answer, or beside it (grounding.verify.parallel), the LLM asked whether a
document says it (grounding.verify with llm.logprobs; service.rag.stages.confidence reads what
it says)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from service.chains import PromptBuilder, PromptLibrary, StuffChain
from service.llm import ChatClient
from service.llm.size import RequestSize
from service.rag.stages.beside import Verifying
from service.rag.stages.confidence import verified
from service.rag.stages.state import RagState, Verification


@dataclass
class Verify:
    """The verify request (prompts/verify.j2: the stuff request's sources and question, then
    "does a document above say the answer?", one token long): its probability of yes goes
    into the state, where Chain reads it. Asked only of an answer written in one stuff
    request (the prompt cache then serves the answer's request what this one read), and
    never of a caller's JSON (its schema checks it). With `beside`, it is sent and not waited
    for: the state holds it on its way (service.rag.stages.beside), and the Reply waits for
    its word beside the answer's request.

    >>> verify = Verify(llm, prompts, size, strategy="stuff")
    >>> verify.wanted(state) and state.take(await verify.run(state))  # state.supported

    Its call is one the earlier stages leave it (`calls_kept`), as they leave the answer's."""

    llm: ChatClient
    prompts: PromptLibrary
    size: RequestSize
    strategy: str  # prompt.strategy: the chain's (Chain sends one stuff request or not alike)
    beside: bool = False  # grounding.verify.parallel in force: sent beside the answer
    min_supported: float | None = None  # grounding.abstain.unsupported: what it refuses below
    name: ClassVar[str] = "verify"
    calls_llm: ClassVar[bool] = True
    calls_kept: ClassVar[int] = 1

    def keeps(self, state: RagState) -> int:
        """The call earlier stages leave it: none when it will not ask (a caller's JSON; once
        the chunks are known, whatever `wanted` says of them), else one."""
        if state.query.options.form.json:
            return 0
        return 1 if not state.chunks or self.wanted(state) else 0

    def wanted(self, state: RagState) -> bool:
        if not state.chunks or state.query.options.form.json:
            return False
        return self.strategy == "stuff" or self._stuff(state).fits_in_one_request(state.chunks)

    async def run(self, state: RagState) -> Verification:
        prepared = await self._stuff(state).prepare(state.chunks)
        if prepared.verification is None:  # never: a stuff request has its verification
            return Verification(None)
        asked = verified(self.llm, prepared.verification)
        if self.beside:  # sent now, its word waited for beside the answer's request
            verifying = Verifying.send(asked, state.timings, self.min_supported)
            return Verification(None, beside=verifying)
        supported, usage = await asked
        return Verification(supported, usage)

    def _stuff(self, state: RagState) -> StuffChain:
        return StuffChain(self.llm, PromptBuilder(self.prompts, state.question), self.size)
