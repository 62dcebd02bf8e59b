"""The answerability judge: one chat-completions call asking whether paragraphs answer a question.

Pure: the caller passes the endpoint, model and key. A score cannot say whether
a paragraph answers a question (seed 000 measured both a floor and a margin and
both failed), so a model is asked. Anything but a clean verdict — a timeout, an
error status, prose instead of JSON — is `JudgeUnavailable`, which the search
reports as `refused: null`, never as an approval.
"""

import json
from dataclasses import dataclass

from .http import api_base, post_once

SYSTEM_PROMPT = (
    "You decide whether the numbered paragraphs contain the answer to the question. "
    "Judge only from the paragraphs, not from your own knowledge. "
    'Reply with JSON only: {"answers": true} when they answer it, {"answers": false} when they do not.'
)
MAX_PARAGRAPH_CHARS = 4000


class JudgeUnavailable(Exception):
    """The judge gave no usable verdict."""


@dataclass(frozen=True)
class Verdict:
    answers: bool
    model: str
    tokens_in: int
    tokens_out: int


def judge_messages(question: str, paragraphs: list[str]) -> list[dict]:
    numbered = "\n\n".join(
        f"[{i}] {text[:MAX_PARAGRAPH_CHARS]}" for i, text in enumerate(paragraphs, start=1)
    )
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"Question: {question}\n\nParagraphs:\n{numbered}"},
    ]


def ask_judge(
    *, url: str, model: str, api_key: str, timeout: float, question: str, paragraphs: list[str], client=None
) -> Verdict:
    """POST {url}/v1/chat/completions at temperature 0 and read a strict JSON verdict.

    `url` is the endpoint's base URL, with or without its trailing ``/v1``, as `EMBED_URL` is.
    """
    body = {
        "model": model,
        "temperature": 0,
        "response_format": {"type": "json_object"},
        "messages": judge_messages(question, paragraphs),
    }
    response = post_once(
        api_base(url) + "/v1/chat/completions",
        body,
        api_key=api_key,
        timeout=timeout,
        who="the judge",
        unavailable=JudgeUnavailable,
        client=client,
    )
    try:
        payload = response.json()
        content = payload["choices"][0]["message"]["content"]
        verdict = parse_verdict(content)
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise JudgeUnavailable(f"the judge's answer was not a verdict ({exc.__class__.__name__})") from None
    usage = payload.get("usage") or {}
    return Verdict(
        answers=verdict,
        model=str(payload.get("model") or model),
        tokens_in=int(usage.get("prompt_tokens") or 0),
        tokens_out=int(usage.get("completion_tokens") or 0),
    )


def parse_verdict(content: str) -> bool:
    """`{"answers": true|false}` and nothing looser: a verdict we have to guess at is no verdict."""
    data = json.loads(content.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip())
    if not isinstance(data, dict) or not isinstance(data.get("answers"), bool):
        raise ValueError("no boolean 'answers'")
    return data["answers"]
