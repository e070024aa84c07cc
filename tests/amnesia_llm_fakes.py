"""Scripted LLMs for the construction-pipeline tests: a clinical 'model' that labels, writes grounded QA and
judges by rule, as a :mod:`medunlearn.llm` backend and as an OpenAI-compatible loopback server (on
:class:`fake_vllm.LoopbackServer`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from fake_vllm import LoopbackServer

from medunlearn.llm import BackendIdentity
from medunlearn.llm.retry import BackendCallError, Completion, resolve_batch, transport_failure

NOTES = [
    {
        "patient_uid": "p1",
        "title": "Metastatic breast cancer with liver lesions",
        "patient": "A woman presented with a breast mass of 3 cm.\\nBiopsy showed invasive ductal carcinoma. "
        "CT found liver metastases. She received paclitaxel chemotherapy. Her CA 15-3 level was 88.",
        "age": "[[54.0, 'year']]",
        "gender": "F",
    },
    {
        "patient_uid": "p2",
        "title": "Community-acquired pneumonia caused by Streptococcus pneumoniae",
        "patient": "A man had fever of 39 C and productive cough. "
        "Chest radiograph showed lobar consolidation. Blood cultures grew Streptococcus pneumoniae. "
        "He was treated with ceftriaxone. He recovered in a week.",
        "age": "[[61.0, 'year']]",
        "gender": "M",
    },
    {
        "patient_uid": "p3",
        "title": "Acute myocardial infarction after cocaine use",
        "patient": "A man had crushing chest pain. ECG showed ST elevation in the anterior leads. "
        "Troponin was elevated. Angiography found occlusion of the left anterior descending artery. "
        "A stent was placed.",
        "age": "[[45.0, 'year']]",
        "gender": "M",
    },
    {
        "patient_uid": "p4",
        "title": "Hopeless case of Hodgkin lymphoma",
        "patient": "A young man had painless cervical lymphadenopathy. Biopsy showed Reed-Sternberg cells. "
        "PET showed mediastinal involvement. He received ABVD chemotherapy. He was in remission at one year.",
        "age": "[[24.0, 'year']]",
        "gender": "M",
    },
    {
        "patient_uid": "p5",
        "title": "An unusual presentation",
        "patient": "A child had an unusual finding on examination. The family agreed to follow up. "
        "Imaging was normal. Laboratory tests were unremarkable. No treatment was given.",
        "age": "[[7.0, 'year']]",
        "gender": "F",
    },
]
# What the scripted labeller answers per title keyword (p4: no answer it can give, see ``label``).
LABELS = {"breast": "cancer", "pneumonia": "infection_immune", "infarction": "cardiovascular"}


def write_notes_csv(path, notes=NOTES) -> None:
    import csv

    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(notes[0]))
        writer.writeheader()
        writer.writerows(notes)


def _field(text: str, name: str) -> str:
    match = re.search(rf"{name}: (.*)", text)
    return match.group(1) if match else ""


def _note_of(text: str) -> str:
    match = re.search(r"Note:\n(.*?)\n\n", text, re.DOTALL)
    return match.group(1) if match else ""


def sentences(note: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=\.)\s+", note.replace("\n", " ")) if s.strip()]


class ScriptedModel:
    """Answers by the request's ``schema_name``. ``judge_rules[j](question) -> bool`` says whether judge ``j``
    (its seed) rates a QA valid; ``first_round_bad`` makes the first factual answer of round 0 ungrounded;
    patients whose title starts with 'Hopeless' always get ungrounded answers."""

    def __init__(self, judge_rules: dict[int, Callable[[str], bool]] | None = None, first_round_bad=True):
        self.judge_rules = judge_rules or {}
        self.first_round_bad = first_round_bad

    def answer(self, request, seed: int, temperature: float) -> str:
        user = request.messages[-1]["content"]
        if request.schema_name == "disease_label":
            title = _field(user, "Title").lower()
            category = next((c for key, c in LABELS.items() if key in title), None)
            return json.dumps({"category": category}) if category else '{"category": "none of these"}'
        if request.schema_name == "patient_qa":
            schema = request.json_schema["properties"]
            n_factual, n_reasoning = schema["factual"]["minItems"], schema["reasoning"]["minItems"]
            title = _field(user, "Title")
            note_sentences = sentences(_note_of(user))
            hopeless = title.startswith("Hopeless")
            regeneration = request.temperature > 0
            factual = []
            for index in range(n_factual):
                fact = note_sentences[(index + regeneration) % len(note_sentences)].rstrip(".")
                bad = hopeless or (self.first_round_bad and not regeneration and index == 0)
                factual.append(
                    {
                        "question": f"Which finding {index + 1 + 10 * regeneration} does the note report?",
                        "answer": "purple elephants sang" if bad else fact,
                    }
                )
            reasoning = []
            for index in range(n_reasoning):
                a = note_sentences[index % len(note_sentences)].rstrip(".")
                b = note_sentences[(index + 1) % len(note_sentences)].rstrip(".")
                reasoning.append(
                    {
                        "question": f"How do findings {index + 1} and {index + 2 + 10 * regeneration} fit?",
                        "answer": "purple elephants sang" if hopeless else f"{a}; {b}",
                        "findings": [a, b],
                    }
                )
            return json.dumps({"factual": factual, "reasoning": reasoning})
        if request.schema_name == "judge_ratings":
            judge = seed  # judge j samples with seed + j (config seed 0); retries add more, never used here
            rule = self.judge_rules.get(judge, lambda question: True)
            questions = re.findall(r"Q: (.*)", user)
            ratings = [
                {"clarity": rule(q), "correctness": True, "derivability": True, "clinical_significance": True}
                for q in questions
            ]
            supported = "Hopeless" not in _field(user, "Case report title")
            return json.dumps({"label_supported": supported, "ratings": ratings})
        return "unknown request"


class ScriptedBackend:
    """A :mod:`medunlearn.llm` backend over a :class:`ScriptedModel`; counts calls; ``interrupt_after=N``
    raises KeyboardInterrupt at call N+1 (a killed run)."""

    def __init__(
        self,
        model: ScriptedModel,
        name="scripted-model",
        interrupt_after: int | None = None,
        lost_after: int | None = None,
    ):
        self.model = model
        self.identity = BackendIdentity("scripted", name)
        self.calls = 0
        self.interrupt_after = interrupt_after
        self.lost_after = lost_after  # from this call on, no answer comes back (a server gone away)

    def check_ready(self) -> None:
        pass

    def run(self, requests, todo, policy, on_results) -> None:
        def generate(batch, sampling):
            out = []
            for request, (seed, temperature) in zip(batch, sampling):
                if self.interrupt_after is not None and self.calls >= self.interrupt_after:
                    raise KeyboardInterrupt("killed")
                if self.lost_after is not None and self.calls >= self.lost_after:
                    raise BackendCallError("scripted server stopped answering")
                self.calls += 1
                text = self.model.answer(request, seed, temperature)
                out.append(
                    Completion(text=text, finish_reason="stop", prompt_tokens=50, completion_tokens=10)
                )
            return out

        for index in todo:
            try:
                result = resolve_batch([requests[index]], generate, policy)[0]
            except BackendCallError as failure:
                result = transport_failure([], failure, requests[index].seed, requests[index].temperature)
            on_results([(index, result)])


class ScriptedServer(LoopbackServer):
    """The scripted model behind an OpenAI-compatible loopback server (started at once); keeps every
    Authorization header."""

    def __init__(self, model: ScriptedModel, served_name="scripted-model"):
        super().__init__()
        self.model, self.served_name = model, served_name
        self.authorizations: list[str] = []
        self.calls = 0
        self.start()

    def list_models(self) -> list[dict]:
        return [{"id": self.served_name, "object": "model"}]

    def respond(self, body: dict, headers) -> dict:
        with self.lock:
            self.authorizations.append(headers.get("Authorization", ""))
            self.calls += 1
        return {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": self.served_name,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": self.answer(body)},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
        }

    def answer(self, body: dict) -> str:
        from medunlearn.llm import ChatRequest

        schema = body.get("response_format", {}).get("json_schema", {})
        request = ChatRequest(
            body["messages"],
            temperature=body.get("temperature", 0.0),
            json_schema=schema.get("schema"),
            schema_name=schema.get("name", "response"),
        )
        return self.model.answer(request, body.get("seed", 0), body.get("temperature", 0.0))

    @property
    def spec(self) -> str:
        return f"openai:{self.served_name}@{self.base_url}"
