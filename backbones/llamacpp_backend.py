"""Local GGUF models through llama-cpp-python: offline, deterministic at temperature 0.

A model is loaded once per process (per file and context length) and shared by every
backbone that names it. The chat template comes from the GGUF file. JSON schemas and
forced tool calls become grammars, so even a 135M model returns parseable output.

Prompt reuse: llama.cpp keeps the last prompt's KV cache and only evaluates the part of
a new prompt that differs; a LlamaRAMCache also keeps KV states of earlier prompts, so
switching between films (contexts) does not start from scratch. `chat_many` orders
requests so questions over the same context run back to back. Across processes, a call that
read a long prompt saves the model's state on disk and a later process sharing that prefix
restores it instead of reading it again (`prefix_states.py`).
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import logging
import os
import re
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..foundation.digests import recorded_sha256
from ..foundation.errors import MovieMemError
from ..foundation.hardware import default_threads
from . import prefix_states
from .base import ProviderBackbone
from .pace import SETTING, PaceBook
from .settings import get_backbone_settings
from .types import CONTEXT, Capabilities, Message, Reply, Request, Text, Tool, ToolCall, Usage, parse_arguments, user

log = logging.getLogger("moviemem.backbones")

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
# the Hermes/Qwen convention, used for templates that know nothing about tools
_TOOL_PROMPT = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{tools}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{{\"name\": <function-name>, \"arguments\": <args-json-object>}}\n</tool_call>"
)
_SHARED_MARK = "\ue000moviemem-shared\ue000"  # private-use characters: where a request's shared prefix ends
_CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
           "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


@dataclass
class _Model:
    llm: Any
    formatter: Any
    template_has_tools: bool
    lock: threading.Lock = field(default_factory=threading.Lock)
    grammars: dict[str, Any] = field(default_factory=dict)
    unit: int = 0  # the context's first tokens read as a shared prefix of their own (`_hold_shared`); 0: none known


_models: dict[tuple[str, int, int, int, str, bool], _Model] = {}  # path, n_ctx, threads, RAM cache, KV type, flash
_models_lock = threading.Lock()


@atexit.register
def _close_all() -> None:
    """Free models before interpreter teardown, when llama.cpp's own finaliser would fail noisily."""
    with _models_lock:
        for model in _models.values():
            model.llm.close()
        _models.clear()


def _state_bytes(state: Any) -> int:
    """What a saved prompt state really holds: the KV state plus the copied logits (up to
    n_batch x vocabulary floats, ~300 MB for a 150k vocabulary) and token ids."""
    return int(state.llama_state_size) + int(getattr(state.scores, "nbytes", 0)) + int(getattr(state.input_ids, "nbytes", 0))


def _RAMCache(base: type, capacity_bytes: int) -> Any:  # noqa: N802 - a class factory, named like the class it makes
    """llama-cpp-python's RAM prompt cache, bounded by what its states really occupy: the stock
    class counts only the KV state, so a run of a few dozen prompts grew past 16 GB."""

    class RAMCache(base):  # type: ignore[misc]  # the base is llama_cpp's cache class, passed in at run time
        @property
        def cache_size(self) -> int:
            return sum(_state_bytes(v) for v in self.cache_state.values())

    return RAMCache(capacity_bytes=capacity_bytes)


KV_TYPES = {"f16": 1, "q8_0": 8}  # GGML_TYPE_F16, GGML_TYPE_Q8_0


@functools.lru_cache(maxsize=16)
def trained_context(path: Path) -> int:
    """The context length a GGUF model was trained for, read from its metadata (vocabulary only: no weights)."""
    try:
        import llama_cpp
    except ImportError:
        raise MovieMemError("llama-cpp-python is not installed: pip install 'moviemem[llama]'") from None
    saved = os.dup(2)  # llama.cpp warns on stderr that a vocabulary-only model has no context: not the user's business
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            llm = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
    except (ValueError, RuntimeError) as exc:
        raise MovieMemError(f"cannot read {path.name}: {exc}") from None
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    meta = llm.metadata
    value = meta.get(f"{meta.get('general.architecture', '')}.context_length")
    llm.close()
    if not value or not str(value).isdigit():
        raise MovieMemError(f"{path.name} does not say its context length; set llm_context (MOVIEMEM_LLM_CONTEXT)")
    return int(value)


def _load(path: Path, n_ctx: int, n_threads: int, cache_bytes: int, kv_type: str = "f16", flash: bool = True) -> _Model:
    flash = flash or kv_type != "f16"  # a quantised KV cache needs flash attention
    # the RAM cache is part of the key: a model another caller loaded with one would answer from it
    key = (str(path.resolve()), n_ctx, n_threads, cache_bytes, kv_type, flash)
    with _models_lock:
        if key in _models:
            return _models[key]
        try:
            import llama_cpp
            from llama_cpp.llama_cache import LlamaRAMCache
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter
        except ImportError:
            raise MovieMemError("llama-cpp-python is not installed: pip install 'moviemem[llama]'") from None
        if not path.is_file():
            raise MovieMemError(f"no GGUF model at {path}")
        try:
            kv = KV_TYPES[kv_type]
            llm = llama_cpp.Llama(str(path), n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads,
                                  seed=0, verbose=False, type_k=kv, type_v=kv, flash_attn=flash)
        except (ValueError, RuntimeError) as exc:
            raise MovieMemError(f"cannot load {path.name}: {exc}") from None
        if cache_bytes > 0:
            llm.set_cache(_RAMCache(LlamaRAMCache, cache_bytes))
        template = llm.metadata.get("tokenizer.chat_template") or _CHATML

        def token_text(tid: int) -> str:
            return llm._model.token_get_text(tid) if tid != -1 else ""

        formatter = Jinja2ChatFormatter(template, eos_token=token_text(llm.token_eos()),
                                        bos_token=token_text(llm.token_bos()))
        model = _Model(llm, formatter, template_has_tools="tools" in template)
        _models[key] = model
        return model


@dataclass
class _Clock:
    """A generation's deadline. llama.cpp reads the prompt in one call no one can interrupt, so a prompt
    already read is never thrown away for the time that took (the first stop check comes after it):
    the reply then still gets `reply_share` seconds. A limit the request set itself (reply_share None)
    is kept as it is."""

    started: float
    limit: float
    how: str
    reply_share: float | None = None
    out: bool = False
    read_s: float | None = None

    def stop(self, ids: Any, logits: Any) -> bool:
        now = time.perf_counter()
        if self.read_s is None:
            self.read_s = now - self.started
            if self.reply_share is not None:
                self.limit = max(self.limit, self.read_s + self.reply_share)
        self.out = now - self.started > self.limit
        return self.out

    def why(self, elapsed: float, read: int, prompt: int, written: int, max_new: int) -> str:
        """What was waited for, the limit and how it was set, and the setting that changes it."""
        return (f"timed out after {elapsed:.0f} s: read {read:,} new of {prompt:,} prompt tokens in {self.read_s or 0:.0f} s, "
                f"then wrote {written} of up to {max_new} reply tokens; the limit was {self.limit:.0f} s ({self.how}); "
                f"raise {SETTING} to wait longer")


def parse_tool_calls(text: str, tools: tuple[Tool, ...]) -> tuple[str, list[ToolCall]]:
    """Tool calls in Hermes/Qwen `<tool_call>{...}</tool_call>` blocks, or a bare JSON object
    naming a tool; returns the remaining text and the calls."""
    names = {t.name for t in tools}
    calls: list[ToolCall] = []

    def add(blob: str) -> bool:
        obj = parse_arguments(blob)
        if not obj or obj.get("name") not in names:
            return False
        args = obj.get("arguments", obj.get("parameters", {}))
        args = parse_arguments(args) if not isinstance(args, dict) else args
        calls.append(ToolCall(id=f"call_{len(calls)}", name=obj["name"], arguments=args or {}))
        return True

    blocks = _TOOL_CALL.findall(text)
    if blocks:
        for b in blocks:
            add(b)
        rest = _TOOL_CALL.sub("", text).strip()
        return rest, calls
    stripped = text.strip()
    if stripped.startswith("{") and add(stripped):
        return "", calls
    return text, calls


class LlamaCppBackbone(ProviderBackbone):
    """`llamacpp:/path/model.gguf`, or `local` / `local-small` for the prepared offline models.

    Options: n_ctx (default: the llm_context setting; 0, its default, is the model's trained length), n_threads (llm_threads; 0 = the physical
    cores this process may use, for prompt reading and generation alike), cache_bytes (RAM prompt
    cache), seed, isolate (llm_isolate: the model runs in a child process, `llamacpp_worker.py`, so a
    native crash is an error, not the end of this process), state_dir, state_max_bytes and state_min_tokens
    (prompt states saved on disk: llm_state_dir, llm_state_max_bytes, llm_state_min_tokens; the folder
    defaults to the asking library's cache folder), and ProviderBackbone's reliability options;
    the KV cache's type and flash attention come from the llm_kv_type and llm_flash_attn settings.
    """

    sequential = True
    price_key = "llamacpp"

    def __init__(self, path: str | Path, *, name: str | None = None, n_ctx: int | None = None,
                 n_threads: int | None = None, cache_bytes: int | None = None, seed: int = 0,
                 isolate: bool | None = None, state_dir: str | Path | None = None, state_max_bytes: int | None = None,
                 state_min_tokens: int | None = None, **options: Any) -> None:
        options.setdefault("concurrency", 1)
        options.setdefault("max_attempts", 1)  # a local model has no transient failures to retry
        super().__init__(**options)
        settings = get_backbone_settings()
        self.path = Path(path).expanduser()
        self._n_ctx = int(n_ctx or settings.llm_context)  # 0: the length the model was trained for, read when needed
        if 0 < self._n_ctx < 256:
            raise MovieMemError(f"a context of {self._n_ctx} tokens holds no prompt; use 256 or more, or 0 for the model's own")
        self.kv_type = settings.llm_kv_type
        self.flash = settings.llm_flash_attn or self.kv_type != "f16"
        threads = settings.llm_threads if n_threads is None else n_threads
        self.n_threads = int(threads) if threads else default_threads()  # physical cores this process may use
        self.cache_bytes = settings.llm_cache_bytes if cache_bytes is None else int(cache_bytes)
        self.seed = seed
        self.isolate = settings.llm_isolate if isolate is None else isolate
        self.state_dir = Path(state_dir).expanduser() if state_dir else settings.llm_state_dir
        self.state_max_bytes = settings.llm_state_max_bytes if state_max_bytes is None else int(state_max_bytes)
        self.state_min_tokens = settings.llm_state_min_tokens if state_min_tokens is None else int(state_min_tokens)
        self._state_key: dict[str, Any] | None = None
        self.name = name or f"llamacpp:{self.path}"
        # the file's name and size identify the weights without hashing a GB on every start
        size = self.path.stat().st_size if self.path.is_file() else 0
        # the trained length is the file's own, which its name and size identify
        self.model_id = (f"llamacpp:{self.path.name}:{size}:ctx{self._n_ctx or 'trained'}"
                         + ("" if self.kv_type == "f16" else f":kv-{self.kv_type}")
                         + (":fa" if self.flash and self.kv_type == "f16" else ""))  # q8_0 always has it
        self.capabilities = Capabilities(text=True, tools=True, json=True, logprobs=True)
        self.last_perf: dict[str, float] = {}
        # reading and writing speeds measured here, for time limits that follow each call's work
        self.paces = PaceBook(settings.scratch_dir / "pace.json")
        self.pace_key = f"{self.model_id}:threads{self.n_threads}"

    @property
    def n_ctx(self) -> int:
        """Tokens of context: the setting, or (0) what the GGUF says it was trained for."""
        if not self._n_ctx:
            self._n_ctx = int(self.worker().call("n_ctx")) if self.isolate else trained_context(self.path)
        return self._n_ctx

    def model(self) -> _Model:
        """The model in this process (the worker's own side when isolated)."""
        if self.isolate:
            raise MovieMemError(f"{self.name} runs its model in a child process (llm_isolate); use isolate=False to hold it here")
        return _load(self.path, self.n_ctx, self.n_threads, self.cache_bytes, self.kv_type, self.flash)

    def worker(self) -> Any:
        """The child process that holds this model (one per model and settings, shared by backbones)."""
        from .llamacpp_worker import worker_for

        # the speeds file is part of the key: the child records speeds where its settings said at its start
        key = (str(self.path), self._n_ctx, self.n_threads, self.cache_bytes, self.kv_type, self.flash,
               self.state_max_bytes, self.state_min_tokens, str(self.paces.path))
        return worker_for(key, self.name, self._worker_spec(self._n_ctx or None, self.cache_bytes))

    def _worker_spec(self, n_ctx: int | None, cache_bytes: int) -> dict[str, Any]:
        """What the worker builds its in-process twin from: this class by dotted path (no import back to
        here) and its options (kv type and flash attention it reads from the same settings)."""
        options = {"path": str(self.path), "name": self.name, "n_ctx": n_ctx, "n_threads": self.n_threads,
                   "cache_bytes": cache_bytes, "seed": self.seed, "state_max_bytes": self.state_max_bytes,
                   "state_min_tokens": self.state_min_tokens}
        return {"target": f"{type(self).__module__}:{type(self).__qualname__}", "options": options}

    def load_check(self, timeout: float) -> float:
        """Load the model in a fresh child and generate one token; seconds taken. A crash or a hang raises
        BackboneCrashed (what `moviemem doctor` and setup run)."""
        from .llamacpp_worker import Worker

        started = time.perf_counter()
        worker = Worker(self.name, self._worker_spec(self._n_ctx or 512, 0))
        try:
            request = Request.build([user("Say yes.")], max_tokens=1)
            reply, _ = worker.call("send", request, timeout, (None, None), timeout=timeout)
        finally:
            worker.close()
        if reply.invalid:
            raise MovieMemError(f"{self.name} loaded but did not answer: {reply.error}")
        return time.perf_counter() - started

    # -- prompt

    def _template_messages(self, messages: tuple[Message, ...], tools: tuple[Tool, ...],
                           native_tools: bool) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for m in messages:
            if m.role == "tool":
                if native_tools:
                    out.append({"role": "tool", "content": m.text})
                else:
                    out.append({"role": "user", "content": f"<tool_response>\n{m.text}\n</tool_response>"})
            elif m.role == "assistant" and m.tool_calls:
                if native_tools:
                    out.append({"role": "assistant", "content": m.text,
                                "tool_calls": [{"type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                                               for c in m.tool_calls]})
                else:
                    blocks = "".join(f"<tool_call>\n{json.dumps({'name': c.name, 'arguments': c.arguments})}\n</tool_call>"
                                     for c in m.tool_calls)
                    out.append({"role": "assistant", "content": (m.text + "\n" if m.text else "") + blocks})
            else:
                out.append({"role": m.role, "content": m.text})
        if tools and not native_tools:
            listing = "\n".join(json.dumps(t.to_openai()) for t in tools)
            instructions = _TOOL_PROMPT.format(tools=listing)
            if out and out[0]["role"] == "system":
                out[0] = {"role": "system", "content": out[0]["content"] + "\n\n" + instructions}
            else:
                out.insert(0, {"role": "system", "content": instructions})
        return out

    def prompt(self, request: Request) -> str:
        """The exact text the model reads (useful for checking prefix sharing)."""
        if self.isolate:
            return str(self.worker().call("prompt", request))
        model = self.model()
        tools = request.tools if request.tool_choice != "none" else ()
        msgs = self._template_messages(request.messages, tools, model.template_has_tools)
        native = [t.to_openai() for t in tools] if tools and model.template_has_tools else None
        prompt: str = model.formatter(messages=msgs, tools=native).prompt
        return prompt

    def _grammar(self, model: _Model, request: Request) -> Any:
        """A grammar forcing the output shape: the JSON schema, or one call of the allowed tools."""
        from llama_cpp.llama_grammar import LlamaGrammar

        schema: dict[str, Any] | None = None
        if request.tools and request.tool_choice not in (None, "none"):
            allowed = [t for t in request.tools if request.tool_choice in ("required", t.name)]
            options: list[dict[str, Any]] = [{"type": "object", "properties": {"name": {"const": t.name}, "arguments": t.parameters},
                        "required": ["name", "arguments"]} for t in allowed]
            schema = options[0] if len(options) == 1 else {"anyOf": options}
        elif request.json_schema is not None and not request.tools:
            schema = request.json_schema or {"type": "object"}
        if schema is None:
            return None
        text = json.dumps(schema, sort_keys=True)
        if text not in model.grammars:
            try:
                model.grammars[text] = LlamaGrammar.from_json_schema(text, verbose=False)
            except Exception as exc:  # noqa: BLE001 - an unsupported schema degrades to free text, then validation
                raise MovieMemError(f"cannot turn this JSON schema into a grammar: {exc}") from None
        return model.grammars[text]

    # -- call

    def _send(self, request: Request, timeout: float) -> Reply:
        if not self.isolate:
            return self.send_here(request, timeout)
        film, folder = self.state_place()
        reply, self.last_perf = self.worker().call("send", request, timeout, (film, str(folder) if folder else None))
        if not isinstance(reply, Reply):
            raise MovieMemError(f"the llama.cpp worker answered a {type(reply).__name__}, not a Reply")
        return reply

    # -- prompt states on disk

    def state_place(self) -> tuple[str | None, Path | None]:
        """The film being asked about and the folder of saved prompt states (None: saving is off): the state_dir
        option or setting, else the asking library's cache folder (`prefix_states.asking`), else the settings'."""
        if self.state_max_bytes <= 0:
            return None, None
        asking = prefix_states.current()
        if self.state_dir is not None:
            return asking.film, self.state_dir
        return asking.film, prefix_states.folder_for(asking.cache_folder)

    def _states(self, folder: str | Path | None) -> prefix_states.PrefixStates | None:
        return prefix_states.store_at(Path(folder), self.state_max_bytes, self.state_min_tokens) if folder else None

    def state_key(self, model: _Model, states: prefix_states.PrefixStates) -> dict[str, Any]:
        """What a saved state must have been made with: these weights (by digest), this llama.cpp build, these
        context settings (a state's bytes, and the numbers read after it, depend on each). The weights' digest
        is recorded in the states' folder with the file's stamp, so a new process does not read a GB again."""
        if self._state_key is None:
            llm = model.llm
            digest = recorded_sha256(self.path, states.folder / prefix_states.DIGESTS)
            self._state_key = {"model_sha256": digest, "build": prefix_states.build_key(),
                               "n_ctx": int(llm.n_ctx()), "n_batch": int(llm.n_batch),
                               "n_ubatch": int(llm.context_params.n_ubatch), "kv_type": self.kv_type, "flash": self.flash}
        return self._state_key

    def _restore(self, model: _Model, tokens: list[int], states: prefix_states.PrefixStates | None) -> tuple[int, float]:
        """Restore the saved state sharing the longest prefix with `tokens` when it spares at least min_tokens of
        reading beyond what this process already holds; (tokens restored, seconds taken)."""
        llm = model.llm
        if states is None or len(tokens) < states.min_tokens:
            return 0, 0.0
        from llama_cpp import Llama

        held = Llama.longest_token_prefix(llm.input_ids[: llm.n_tokens].tolist(), tokens)
        ram = getattr(llm.cache, "cache_state", None) or {}
        held = max([held, *(Llama.longest_token_prefix(k, tokens) for k in ram)])
        if len(tokens) - held < states.min_tokens:
            return 0, 0.0
        started = time.perf_counter()
        found = states.find(self.state_key(model, states), tokens, held + states.min_tokens)
        if found is None:
            return 0, 0.0
        entry, shared = found
        payload = states.payload(entry)
        if payload is None:
            return 0, 0.0
        keep = min(shared, len(tokens) - 1)  # the last prompt token is always read: its logits are the ones used
        try:
            prefix_states.restore(llm, entry.tokens, payload, keep)
        except prefix_states.Damaged as exc:
            states.drop(entry.path, str(exc), entry.inode)
            return 0, 0.0
        return keep, time.perf_counter() - started

    def _save(self, model: _Model, film: str | None, read: int, states: prefix_states.PrefixStates | None,
              key: dict[str, Any] | None = None) -> float:
        """Save this context's state when the call read at least min_tokens new tokens; seconds taken. A failed
        write (a full or read-only disk) is said once and costs the answer nothing."""
        if states is None or read < states.min_tokens:
            return 0.0
        started = time.perf_counter()
        try:
            tokens, payload = prefix_states.capture(model.llm)
            states.save(key or self.state_key(model, states), tokens, payload, film=film, backbone=self.name)
        except OSError as exc:
            states.warn(states.folder, f"cannot save a prompt state there: {exc}")
        return time.perf_counter() - started

    def _shared_tokens(self, model: _Model, request: Request, text_prompt: str, tokens: list[int]) -> int:
        """How many leading prompt tokens the request's shared prefix covers (0: none marked, or a template that
        does not keep the marked text as it is)."""
        if not request.shared_prefix:
            return 0
        from llama_cpp import Llama

        last, at = request.messages[-1], request.shared_prefix
        marked = Message(last.role, (Text(last.text[:at] + _SHARED_MARK + last.text[at:]),), last.tool_calls,
                         last.tool_call_id, last.name)
        text = self.prompt(replace(request, messages=(*request.messages[:-1], marked)))
        cut = text.find(_SHARED_MARK)
        if cut < 0 or text[:cut] + text[cut + len(_SHARED_MARK):] != text_prompt:
            log.warning("%s: the chat template changes the marked text; the shared prefix is read with the rest", self.name)
            return 0
        head = model.llm.tokenize(text[:cut].encode(), add_bos=True, special=True)
        return min(int(Llama.longest_token_prefix(head, tokens)), len(tokens) - 1)

    def _hold_shared(self, model: _Model, tokens: list[int], n: int, film: str | None,
                     states: prefix_states.PrefixStates | None) -> tuple[int, float, float, int]:
        """Make the context hold exactly the first `n` tokens, read as a unit of their own: kept from the last call,
        restored from a state saved on disk (or the RAM cache when saving is off), else read from the start and
        saved. llama.cpp's sums depend on how a prompt is cut into batches, so a prefix always read alone is what
        makes the numbers after it the same whether it was read now, held or restored; (tokens restored, seconds
        restoring, seconds saving, tokens read)."""
        from llama_cpp import Llama

        llm, head = model.llm, tokens[:n]
        if model.unit == n and Llama.longest_token_prefix(llm.input_ids[: llm.n_tokens].tolist(), head) == n:
            llm.n_tokens = n
            return 0, 0.0, 0.0, 0
        model.unit = 0
        started = time.perf_counter()
        ram = getattr(llm.cache, "cache_state", None) if states is None else None
        if ram is not None and tuple(head) in ram:
            llm.load_state(ram[tuple(head)])
            ram.move_to_end(tuple(head))
            model.unit = n
            return 0, 0.0, 0.0, 0
        key = {**self.state_key(model, states), **prefix_states.SHARED_READ} if states is not None else {}
        found = states.find(key, head, n) if states is not None and n >= states.min_tokens else None
        if states is not None and found is not None and found[0].n_tokens == n:
            entry = found[0]
            payload = states.payload(entry)
            if payload is not None:
                try:
                    prefix_states.restore(llm, entry.tokens, payload, n)
                    model.unit = n
                    return n, time.perf_counter() - started, 0.0, 0
                except prefix_states.Damaged as exc:
                    states.drop(entry.path, str(exc), entry.inode)
        llm.n_tokens = 0
        llm.eval(head)
        model.unit = n
        if states is None:
            if ram is not None:
                llm.cache[head] = llm.save_state()
            return 0, 0.0, 0.0, n
        return 0, 0.0, self._save(model, film, n, states, key), n

    def send_here(self, request: Request, timeout: float, where: tuple[str | None, str | None] | None = None) -> Reply:
        """One call answered by the model in this process; `where` is (film, state folder) when the parent
        resolved them (the worker), else they come from this process's own asking context."""
        model = self.model()  # first: it says so when llama-cpp-python is not installed
        from llama_cpp import Llama, StoppingCriteriaList
        from llama_cpp import llama_cpp as C  # noqa: N812 - the C API, named as llama.cpp's own examples do

        llm = model.llm
        text_prompt = self.prompt(request)
        tokens = llm.tokenize(text_prompt.encode(), add_bos=True, special=True)
        room = self.n_ctx - len(tokens)
        if room < 1:
            return Reply.failed(f"prompt has {len(tokens)} tokens; the context holds {self.n_ctx}",
                                usage=Usage(input_tokens=len(tokens)), finish_reason=CONTEXT)
        film, folder = where if where is not None else self.state_place()
        states = self._states(folder)
        if request.logprobs:
            return self._next_token(model, tokens, request, text_prompt, film, states)
        grammar = self._grammar(model, request)
        greedy = request.temperature <= 0
        max_new = min(request.max_tokens, room)
        with model.lock:
            C.llama_perf_context_reset(llm.ctx)
            started = time.perf_counter()
            shared = self._shared_tokens(model, request, text_prompt, tokens)
            if shared:
                restored, restore_s, save_s, read = self._hold_shared(model, tokens, shared, film, states)
                to_read = len(tokens) - shared + read
            else:
                model.unit = 0
                restored, restore_s = self._restore(model, tokens, states)
                started = time.perf_counter()
                to_read = len(tokens) - Llama.longest_token_prefix(llm.input_ids[: llm.n_tokens].tolist(), tokens)
            clock = self._clock(request, started, to_read, max_new)
            ram, llm.cache = llm.cache, (None if shared else llm.cache)  # its lookup would resume past the shared prefix
            try:
                out = llm.create_completion(
                    tokens, max_tokens=max_new, temperature=max(0.0, request.temperature),
                    top_k=1 if greedy else 40, top_p=1.0 if greedy else 0.95, min_p=0.0 if greedy else 0.05,
                    repeat_penalty=1.0, seed=self.seed if request.seed is None else request.seed, grammar=grammar,
                    stopping_criteria=StoppingCriteriaList([clock.stop]))
            finally:
                llm.cache = ram
            elapsed = time.perf_counter() - started
            perf = C.llama_perf_context(llm.ctx)
            if not shared:
                save_s = self._save(model, film, perf.n_p_eval, states)
        self.last_perf = {"prompt_tokens": len(tokens), "prompt_eval_tokens": perf.n_p_eval,
                          "prompt_eval_s": perf.t_p_eval_ms / 1000, "gen_tokens": perf.n_eval,
                          "gen_s": perf.t_eval_ms / 1000, "wall_s": elapsed, "restored_tokens": restored,
                          "restore_s": restore_s, "save_s": save_s}
        self.paces.record(self.pace_key, read=perf.n_p_eval, read_s=perf.t_p_eval_ms / 1000, written=perf.n_eval,
                          write_s=perf.t_eval_ms / 1000)
        choice = out["choices"][0]
        raw_text = choice["text"]
        usage = Usage(input_tokens=out["usage"]["prompt_tokens"], output_tokens=out["usage"]["completion_tokens"],
                      cached_input_tokens=max(0, len(tokens) - perf.n_p_eval), restored_input_tokens=restored)
        finish = choice.get("finish_reason") or "stop"
        if clock.out:
            return Reply.failed(clock.why(elapsed, perf.n_p_eval, len(tokens), perf.n_eval, max_new), raw=raw_text,
                                usage=usage, finish_reason="timeout", transient=True)  # depends on machine load: never cached
        calls: list[ToolCall]
        text, calls = raw_text, []
        if request.tools and request.tool_choice != "none":
            text, calls = parse_tool_calls(raw_text, request.tools)
            # ids unique across the turns of a conversation, yet the same on a rerun
            calls = [replace(c, id="call_" + hashlib.sha256(f"{text_prompt}|{i}|{raw_text}".encode()).hexdigest()[:20])
                     for i, c in enumerate(calls)]
            if calls:
                finish = "tool_calls"
        return Reply(text=text.strip(), tool_calls=calls, usage=usage, finish_reason=finish, raw=raw_text)

    def _clock(self, request: Request, started: float, to_read: int, max_new: int) -> _Clock:
        """The call's time limit: the request's own, else one that follows the work (the prompt tokens to
        read and the reply's tokens at this machine's measured speeds, never under backbone_timeout_s)."""
        if request.timeout:
            return _Clock(started, request.timeout, "the request's own limit")
        pace = self.paces.get(self.pace_key)
        limit, how = pace.limit(self.timeout, to_read, max_new)
        return _Clock(started, limit, how, reply_share=pace.limit(self.timeout, 0, max_new)[0])

    def _next_token(self, model: _Model, tokens: list[int], request: Request, text_prompt: str, film: str | None = None,
                    states: prefix_states.PrefixStates | None = None) -> Reply:
        """The next token's top alternatives with log-probabilities, from one forward pass.

        Without `logits_all` llama.cpp keeps only the last position's logits, which is all a
        next-token distribution needs (logits_all would hold n_ctx x vocab floats, ~5 GB here).
        The prompt prefix already in the context is reused, as in generation."""
        import numpy as np
        from llama_cpp import Llama

        llm, top = model.llm, request.logprobs
        with model.lock:
            started = time.perf_counter()
            shared = same = self._shared_tokens(model, request, text_prompt, tokens)
            if shared:
                restored, restore_s, save_s, read = self._hold_shared(model, tokens, shared, film, states)
                read += len(tokens) - shared
            else:
                model.unit = 0
                restored, restore_s = self._restore(model, tokens, states)
                started = time.perf_counter()
                # at least the last token is evaluated: its logits are the ones wanted
                same = Llama.longest_token_prefix(llm.input_ids[: llm.n_tokens].tolist(), tokens[:-1])
                read = len(tokens) - same
            llm.n_tokens = same
            llm.eval(tokens[same:])
            logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).astype(np.float64)  # noqa: SLF001 - llama-cpp-python exposes logits only on its context
            elapsed = time.perf_counter() - started
            if not shared:
                save_s = self._save(model, film, read, states)
        logp = logits - (logits.max() + np.log(np.exp(logits - logits.max()).sum()))
        best = np.argsort(-logp)[:top]
        alternatives: dict[str, float] = {}
        for t in best:
            text = llm.detokenize([int(t)]).decode("utf-8", errors="replace")
            alternatives.setdefault(text, float(logp[t]))
        self.last_perf = {"prompt_tokens": len(tokens), "prompt_eval_tokens": read,
                          "prompt_eval_s": elapsed, "gen_tokens": 0, "gen_s": 0.0, "wall_s": elapsed,
                          "restored_tokens": restored, "restore_s": restore_s, "save_s": save_s}
        # a letter read from log-probabilities times the prompt's reading too: `bench --plan` prices with it (issue 61)
        self.paces.record(self.pace_key, read=read, read_s=elapsed - save_s, written=0, write_s=0.0)
        text = next(iter(alternatives))
        usage = Usage(input_tokens=len(tokens), output_tokens=1, cached_input_tokens=len(tokens) - read,
                      restored_input_tokens=restored)
        return Reply(text=text.strip(), usage=usage, finish_reason="length", raw=text, logprobs=[alternatives])


def from_spec(kind: str, arg: str | None, **options: Any) -> LlamaCppBackbone:
    """`llamacpp:PATH`, `local` (Qwen2.5-Coder-1.5B) or `local-small` (SmolLM2-135M)."""
    if kind in ("local", "local-small"):
        from ..models import model_path

        return LlamaCppBackbone(model_path(kind), name=kind, **options)
    if not arg:
        raise MovieMemError("use llamacpp:/path/to/model.gguf")
    return LlamaCppBackbone(arg, **options)
