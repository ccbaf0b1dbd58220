"""--strict: the checks that catch a candidate which games the check rather than computing.

KernelBench calls the candidate a few times on inputs drawn from known seeds, compares with
`torch.allclose` and times with CUDA events on the current stream. A candidate can pass that
without computing its answer: replay outputs it has seen, return a tensor subclass whose
comparisons lie, patch the timers or the comparison, leave work on another stream or a
thread, or return memory it never wrote. `Watch` records what the candidate could patch
before its module is imported; `strict_calls` runs the extra calls after the ordinary
trials. Each finding has its own reason and the seed that replays it.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import random
import sys
import threading
import time
import weakref
from typing import Any, Callable, Optional

import torch

from harness.compare import allclose, chunks, count_not_close, equal_nan_as_zero, nan_where_finite
from harness.problem import CheckError
from harness.protocol import set_seed, sync, to_device

# Why a candidate fails under --strict, in the order the verdict picks them.
STRICT_REASONS = (
    "patched_timer",             # time.perf_counter, torch.cuda.synchronize, Event.record ... replaced
    "patched_check",             # torch.allclose, torch.equal, Tensor.__eq__ ... replaced
    "patched_reference",         # the reference's class or module, nn.Module or a torch function replaced
    "extra_threads",             # a thread the candidate started is still running
    "tensor_subclass",           # the output is not a plain torch.Tensor (lazy, or comparisons overridden)
    "output_aliasing",           # the output shares storage with an input, a parameter or an earlier output
    "replayed_output",           # on fresh inputs, the output is the reference's answer to other inputs
    "mismatch_on_fresh_inputs",  # outside the tolerance on inputs the ordinary trials never drew
    "forward_error_on_fresh_inputs",
    "nondeterministic",          # the same inputs twice, and a result outside the tolerance
    "side_stream",               # the output changed after the current stream had finished
    "unwritten_output",          # NaN where the reference is finite once freed memory is poisoned
)
# Fresh input draws, and how many of the ordinary trials' inputs come back among them.
FRESH_CALLS = 3
REPLAYED_TRIALS = 2


# Host bytes of the reference's answers kept to name a replay; past it a replay is still a
# failure, called mismatch_on_fresh_inputs.
ANSWER_BUDGET_BYTES = 4 << 30


def keep_answer(answers: dict, answer: torch.Tensor) -> bool:
    """Whether one more answer fits in ANSWER_BUDGET_BYTES beside those kept."""
    held = sum(a.numel() * a.element_size() for a in answers.values())
    return held + answer.numel() * answer.element_size() <= ANSWER_BUDGET_BYTES


def new_strict_seed() -> int:
    """A seed the candidate cannot know in advance (printed, so a failure can be replayed)."""
    return random.SystemRandom().randrange(2**31)


def _watched() -> dict:
    """name -> (owner, attribute, reason) of everything a candidate could patch to lie."""
    timers = [(time, n) for n in ("perf_counter", "perf_counter_ns", "time", "time_ns", "monotonic", "process_time")]
    timers += [(torch.cuda, "synchronize"), (torch.cuda, "Event"), (torch.cuda.Event, "record"),
               (torch.cuda.Event, "elapsed_time"), (torch.cuda.Event, "synchronize"), (torch.cuda, "current_stream")]
    checks = [(torch, n) for n in ("allclose", "isclose", "equal", "eq", "isfinite", "isnan")]
    checks += [(torch.Tensor, n) for n in ("__eq__", "allclose", "eq", "cpu", "to", "clone", "__torch_function__")]
    out = {}
    for owner, attr in timers:
        out[f"{getattr(owner, '__name__', owner)}.{attr}"] = (owner, attr, "patched_timer")
    for owner, attr in checks:
        out[f"{getattr(owner, '__name__', owner)}.{attr}"] = (owner, attr, "patched_check")
    return out


# Who started each thread: the first frame outside threading and concurrent.futures when
# Thread.start ran. A worker pool that torch.compile (or Triton) starts is torch's, not the
# candidate's, even though its threads run concurrent.futures code.
_STARTED_BY: "weakref.WeakKeyDictionary[threading.Thread, str]" = weakref.WeakKeyDictionary()
_LIBRARY_DIRS = tuple(os.path.dirname(m.__file__) + os.sep for m in (torch,)) + tuple(
    os.path.dirname(spec.origin) + os.sep for spec in [importlib.util.find_spec("triton")] if spec and spec.origin)
_PLUMBING = (os.sep + "threading.py", os.sep + "concurrent" + os.sep, os.path.abspath(__file__))


def _record_starts() -> None:
    """Wrap Thread.start once per process to note who starts each thread."""
    if getattr(threading.Thread.start, "_kb_records_starter", False):
        return
    real_start = threading.Thread.start

    def start(thread, *args, **kwargs):
        frame = sys._getframe(1)
        while frame is not None and any(p in frame.f_code.co_filename for p in _PLUMBING):
            frame = frame.f_back
        _STARTED_BY[thread] = frame.f_code.co_filename if frame is not None else "?"
        return real_start(thread, *args, **kwargs)

    start._kb_records_starter = True
    threading.Thread.start = start


def _thread_origin(thread: threading.Thread) -> str:
    """The file that started the thread, else the module of its target."""
    if thread in _STARTED_BY:
        return _STARTED_BY[thread]
    target = getattr(thread, "_target", None)
    return getattr(target, "__module__", None) or type(thread).__module__ or "?"


def _library_thread(thread: threading.Thread) -> bool:
    origin = _thread_origin(thread)
    return origin.startswith(_LIBRARY_DIRS) or origin.split(".")[0] in ("torch", "triton")


_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_MISSING = object()  # an attribute the candidate deleted


def _torch_made(new: Any, original: Any) -> bool:
    """Whether a replacement is torch's own (torch.compile wraps torch.manual_seed and
    nn.Module.__init__): every function along its __wrapped__ chain is defined in torch's
    package, and a chain that ends in a builtin ends in the original."""
    f = new.__func__ if isinstance(new, (staticmethod, classmethod)) else new
    for _ in range(16):
        code = getattr(f, "__code__", None)
        if code is None:
            return f is original
        if not os.path.abspath(code.co_filename).startswith(_TORCH_DIR):
            return False
        f = getattr(f, "__wrapped__", None)
        if f is None:
            return True
    return False


def _reference_namespaces(reference: Optional[type]) -> dict:
    """name -> object whose namespace the candidate must leave as it was: torch's functions,
    Tensor's methods, and the reference's class, its bases (nn.Module among them) and module.
    A candidate that replaces one of them changes the answer it is compared with."""
    owners = {"torch": torch, "torch.nn.functional": torch.nn.functional, "torch.Tensor": torch.Tensor,
              "torch.nn.Module": torch.nn.Module}
    if reference is not None:
        owners.update({f"{c.__module__}.{c.__qualname__}": c for c in reference.__mro__ if c is not object})
        module = sys.modules.get(reference.__module__)
        if module is not None:
            owners[module.__name__] = module
    return owners


class Watch:
    """What the candidate could patch, and the threads alive, before its module is imported
    (`reference`: the reference's class, whose code and module are watched as well)."""

    def __init__(self, reference: Optional[type] = None):
        self.items = _watched()
        self.originals = {name: self._lookup(owner, attr) for name, (owner, attr, _) in self.items.items()}
        covered = {(id(owner), attr) for owner, attr, _ in self.items.values()}
        # Callables only in modules (their numbers are the problem's sizes); everything in classes.
        self.namespaces = {
            name: (owner, {attr: value for attr, value in vars(owner).items()
                           if (id(owner), attr) not in covered and (isinstance(owner, type) or callable(value))})
            for name, owner in _reference_namespaces(reference).items()}
        self.threads = {t.ident for t in threading.enumerate()}
        _record_starts()

    @staticmethod
    def _lookup(owner, attr) -> tuple:
        # The object as stored (getattr_static), and whether the owner itself holds it.
        return inspect.getattr_static(owner, attr, None), attr in vars(owner)

    def patched(self, when: str, seed: Optional[int] = None) -> list:
        """Findings for every watched function that changed since the watch began; each is
        put back, so the rest of the check (and its timing) uses the real one."""
        found = []
        for name, (owner, attr, reason) in self.items.items():
            original, owned = self.originals[name]
            if self._lookup(owner, attr)[0] is original:
                continue
            found.append(finding(reason, f"{name} was replaced {when}", seed))
            if owned:
                setattr(owner, attr, original)
            else:
                delattr(owner, attr)
        for name, (owner, values) in self.namespaces.items():
            current = vars(owner)
            for attr, original in values.items():
                now = current.get(attr, _MISSING)
                if now is original or (now is not _MISSING and _torch_made(now, original)):
                    continue
                what = "removed" if now is _MISSING else "replaced"
                found.append(finding("patched_reference", f"{name}.{attr} was {what} {when}", seed))
                setattr(owner, attr, original)
        return found

    def new_threads(self, when: str, seed: Optional[int] = None) -> list:
        """A finding for the threads started since the watch began that are still alive
        (torch's own helper threads excepted)."""
        extra = [t for t in threading.enumerate() if t.ident not in self.threads and t.is_alive()
                 and not _library_thread(t)]
        if not extra:
            return []
        names = ", ".join(f"{t.name} ({_thread_origin(t)})" for t in extra)
        self.threads |= {t.ident for t in extra}  # reported once
        return [finding("extra_threads", f"{len(extra)} thread(s) the candidate started are still running {when}: "
                                         f"{names}", seed)]


def finding(reason: str, message: str, seed: Optional[int]) -> dict:
    return {"reason": reason, "message": message, "seed": seed}


def subclass_finding(out: Any, when: str, seed: Optional[int]) -> list:
    """A tensor subclass (or a __torch_function__ override) can make allclose and equal
    say anything and compute lazily: only a plain torch.Tensor is accepted."""
    if isinstance(out, torch.Tensor) and type(out) is not torch.Tensor:
        return [finding("tensor_subclass", f"the output is a {type(out).__module__}.{type(out).__qualname__}, "
                                           f"not a plain torch.Tensor ({when})", seed)]
    return []


def storage_span(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    (a0, a1), (b0, b1) = storage_span(a), storage_span(b)
    return a.device == b.device and a1 > a0 and b1 > b0 and a0 < b1 and b0 < a1


def aliasing_findings(out: torch.Tensor, inputs: list, model: torch.nn.Module, earlier: Optional[torch.Tensor],
                      reference_aliases: set, when: str, seed: Optional[int]) -> list:
    """The output shares memory with something the caller holds: a later call, or the
    model's next step, would change an output the caller already has. What the
    reference's own output shares ({"input", "parameter"}) is allowed: a reference that
    returns a view makes a candidate that returns one honest."""
    found = []
    if "input" not in reference_aliases:
        for k, x in enumerate(inputs):
            if isinstance(x, torch.Tensor) and shares_storage(out, x):
                found.append(f"input {k}")
    if "parameter" not in reference_aliases:
        for name, t in [*model.named_parameters(), *model.named_buffers()]:
            if shares_storage(out, t):
                found.append(f"the candidate's {name}")
    if earlier is not None and shares_storage(out, earlier):
        found.append("the output of the call before")
    if not found:
        return []
    return [finding("output_aliasing", f"the output shares storage with {', '.join(found)} ({when})", seed)]


def degenerate_warnings(ref_out: torch.Tensor, inputs: list, atol: float, rtol: float) -> set:
    """Trivial answers that would pass this problem's tolerance: then a pass says little."""
    ref = ref_out.detach().cpu()
    if not ref.is_floating_point() or not ref.numel():
        return set()
    found = set()
    parts = [c for (c,) in chunks(ref)]  # no whole-size copies
    # allclose(ref, c) for a constant c, without a tensor of c: |ref - c| <= atol + rtol * |c|.
    if all(bool(c.abs().le(atol).all()) for c in parts):
        found.add("an all-zeros output")
    mean = sum(torch.sum(c, dtype=torch.float64).item() for c in parts) / ref.numel()
    if all(bool((c.double() - mean).abs().le(atol + rtol * abs(mean)).all()) for c in parts):
        found.add("a constant output (the reference's mean)")
    for k, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.shape == ref.shape and x.dtype == ref.dtype \
                and allclose(ref, x.detach().cpu(), atol, rtol):
            found.add(f"input {k} returned as it is")
    return found


# ----------------------------------------------------------------------------- CUDA only


# At most this many requests fill the free blocks before a call (each is one allocation and
# a fill), and at most this many of them may come from new segments rather than the cache.
POISON_MAX_REQUESTS = 256
POISON_MAX_NEW_SEGMENTS = 2
# torch's caching allocator serves requests up to 1 MiB from its small pool (2 MiB segments):
# a free block there is asked for in pieces of at most that much.
SMALL_REQUEST_LIMIT = 1 << 20


def free_block_requests(snapshot: list, device_index: int, stream: Optional[int] = None) -> list[int]:
    """The requests that hand back the caching allocator's free blocks on one device (and,
    given, one stream's pool: only those serve the current stream), largest first, from
    torch.cuda.memory_snapshot()'s segments: a large-pool block by its size, a small-pool
    block in pieces the small pool serves."""
    requests = []
    for segment in snapshot:
        if segment.get("device") != device_index or (stream is not None and segment.get("stream", stream) != stream):
            continue
        small = segment.get("segment_type") == "small"
        for block in segment.get("blocks", []):
            size = block.get("size", 0)
            if block.get("state") != "inactive" or size <= 0:
                continue
            while small and size > SMALL_REQUEST_LIMIT:
                requests.append(SMALL_REQUEST_LIMIT)
                size -= SMALL_REQUEST_LIMIT
            requests.append(size)
    return sorted(requests, reverse=True)[:POISON_MAX_REQUESTS]


def poison_free_memory(device: torch.device) -> int:
    """Fill the caching allocator's free blocks with 0xFF bytes (NaN in fp32, fp16 and
    bf16), so that an output a kernel never wrote (a launch that failed silently) reads
    NaN instead of what a freed tensor, the reference's answer say, left there. Each free
    block is asked for by its own size, so the allocator hands that block back. Returns
    the bytes filled."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    stream = torch.cuda.current_stream(device).cuda_stream
    held, filled, new_segments = [], 0, 0
    for size in free_block_requests(torch.cuda.memory_snapshot(), index, stream):
        reserved = torch.cuda.memory_reserved(device)
        try:
            block = torch.empty(size, dtype=torch.uint8, device=device)
        except torch.cuda.OutOfMemoryError:
            break
        block.fill_(0xFF)  # from a new segment too: it joins the cache filled
        held.append(block)
        filled += size
        if torch.cuda.memory_reserved(device) > reserved:
            new_segments += 1
            if new_segments >= POISON_MAX_NEW_SEGMENTS:
                break
    torch.cuda.synchronize(device)
    del held
    return filled


def timed_cuda_call(fn: Callable, args: list, device: torch.device) -> tuple[Any, dict]:
    """One call timed both ways, and the output copied once the current stream is done and
    again after the whole device is: work on another stream shows up as a difference."""
    torch.cuda.synchronize(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record()
    out = fn(*args)
    end.record()
    end.synchronize()
    copy_began = time.perf_counter()
    early = out.detach().to("cpu", copy=True) if isinstance(out, torch.Tensor) else None
    copy_s = time.perf_counter() - copy_began
    torch.cuda.synchronize(device)
    device_ms = (time.perf_counter() - t0 - copy_s) * 1e3  # the snapshot's own copy is not the call's
    late = out.detach().to("cpu", copy=True) if isinstance(out, torch.Tensor) else None
    changed = early is not None and not torch.equal(early.nan_to_num(), late.nan_to_num())
    return out, {"event_ms": start.elapsed_time(end), "device_ms": device_ms, "changed_after_stream": changed}


# Waiting for the whole device costs a synchronize or two beyond the events (tens of us): a
# call whose device-wide time exceeds twice its event time by more than this has hidden work.
SIDE_STREAM_MARGIN_MS = 0.25


def side_stream_findings(timings: list, seed: Optional[int]) -> list:
    """The output changed after the current stream finished, or every call took far longer
    to a device-wide synchronize than its current-stream events say."""
    if any(t["changed_after_stream"] for t in timings):
        return [finding("side_stream", "the output changed after the current stream had finished: it is written "
                                       "by work on another stream, which CUDA events on the current stream do not "
                                       "time", seed)]
    event = min(t["event_ms"] for t in timings)
    device = min(t["device_ms"] for t in timings)
    if device > 2 * event + SIDE_STREAM_MARGIN_MS:  # host launch costs are in both; other streams only here
        return [finding("side_stream", f"a call takes {device:.3f} ms to a device-wide synchronize but "
                                       f"{event:.3f} ms by current-stream events: work runs on another stream",
                        seed)]
    return []


# ----------------------------------------------------------------------------- the extra calls


def strict_calls(ref_model, new_model, make_inputs: Callable, dev: torch.device, torch_dtype: torch.dtype,
                 keep_integer_inputs: bool, atol: float, rtol: float, trial_seeds: list, strict_seed: int,
                 watch: Watch, known_answers: Optional[dict] = None) -> dict:
    """The extra calls, after the ordinary trials passed: fresh inputs and two of the
    trials' inputs again, in an order drawn from `strict_seed`, each checked against the
    reference; the same inputs twice (determinism); every output's type and storage; the
    watch after each call. The reference's outputs are kept on the host; `known_answers`
    ({input seed: output}) are the ordinary trials', so a replay of any of them is named."""
    rng = random.Random(strict_seed)
    plan = [("fresh", rng.randrange(2**32 - 1)) for _ in range(FRESH_CALLS)]
    plan += [("trial replay", s) for s in trial_seeds[:REPLAYED_TRIALS]]
    rng.shuffle(plan)
    cuda = dev.type == "cuda"
    findings: list = []
    warnings: list = []
    calls: list = []
    answers: dict = dict(known_answers or {})  # input seed -> the reference's output, on the host
    degenerate: Optional[set] = None
    timings: list = []
    earlier = None

    def draw(seed):  # on the host: each model gets its own device copy, one at a time
        set_seed(seed, dev)
        return [to_device(x, torch.device("cpu"), torch_dtype, keep_integer_inputs) for x in make_inputs()]

    def on_device(inputs):
        return [x.to(dev, copy=True) if isinstance(x, torch.Tensor) else x for x in inputs]

    def reference_answer(inputs, seed):
        ref_inputs = on_device(inputs)
        set_seed(seed, dev)  # the reference runs from its inputs' seed, as in a trial (KernelBench's protocol)
        try:
            out = ref_model(*ref_inputs)
            sync(dev)
        except Exception as exc:  # the check's failure, not the candidate's
            raise CheckError(f"the reference's forward raised on --strict's inputs: {type(exc).__name__}: {exc}") from exc
        aliases = {"input"} if any(isinstance(x, torch.Tensor) and shares_storage(out, x) for x in ref_inputs) else set()
        if any(shares_storage(out, t) for t in [*ref_model.parameters(), *ref_model.buffers()]):
            aliases.add("parameter")
        # A host copy on CUDA; on the CPU the output itself (its inputs go with this call).
        return out.detach().to("cpu", copy=cuda), aliases

    def call(inputs, seed):
        if cuda:
            poison_free_memory(dev)
            out, timing = timed_cuda_call(new_model, inputs, dev)
            timings.append(timing)
        else:
            out = new_model(*inputs)
        findings.extend(watch.patched(f"during the call on inputs of seed {seed}", strict_seed))
        return out

    with torch.no_grad():
        for kind, seed in plan:
            inputs = draw(seed)
            ref_host, ref_aliases = reference_answer(inputs, seed)
            trivial = degenerate_warnings(ref_host, inputs, atol, rtol)
            degenerate = trivial if degenerate is None else degenerate & trivial  # on every input drawn
            cand_inputs = on_device(inputs)
            del inputs
            try:
                out = call(cand_inputs, seed)
            except Exception as exc:  # noqa: BLE001 - a failure on fresh inputs is the candidate's
                findings.append(finding("forward_error_on_fresh_inputs",
                                        f"the candidate raised {type(exc).__name__}: {str(exc)[:300]} on fresh "
                                        f"inputs (input seed {seed})", strict_seed))
                break
            when = f"{kind} inputs of seed {seed}"
            record = {"kind": kind, "input_seed": seed, "ok": True}
            calls.append(record)
            if not isinstance(out, torch.Tensor):
                record["ok"] = False
                findings.append(finding("mismatch_on_fresh_inputs", f"returned a {type(out).__name__} ({when})",
                                        strict_seed))
                continue
            found = subclass_finding(out, when, strict_seed)
            found = found or aliasing_findings(out, cand_inputs, new_model, earlier, ref_aliases, when, strict_seed)
            found = found or _answer_findings(out, ref_host, answers, seed, cuda, atol, rtol, when, strict_seed)
            if found:
                record["ok"] = False
                findings.extend(found)
            if keep_answer(answers, ref_host):
                answers[seed] = ref_host
            earlier = out  # kept alive, so its memory cannot be handed out again during the next call
        del earlier

        if not findings and plan:
            first_seed = plan[0][1]
            first_inputs = draw(first_seed)
            first_answer = answers.get(first_seed)
            if first_answer is None:  # past the budget: the reference again
                first_answer = reference_answer(first_inputs, first_seed)[0]
            findings.extend(_determinism(new_model, on_device, first_inputs, first_answer, atol, rtol, strict_seed,
                                         warnings, first_seed))
    if cuda and timings:
        findings.extend(side_stream_findings(timings, strict_seed))
    findings.extend(watch.patched("after the calls", strict_seed))
    findings.extend(watch.new_threads("after the calls", strict_seed))
    if degenerate:
        warnings.append(f"the check cannot tell: {', '.join(sorted(degenerate))} would also pass "
                            f"allclose(atol={atol:g}, rtol={rtol:g}) on every input drawn")
    return {"seed": strict_seed, "calls": calls, "findings": findings, "warnings": warnings}


def _answer_findings(out, ref_host, answers, seed, cuda, atol, rtol, when, strict_seed) -> list:
    new_host = out.detach().cpu()  # compared at once, never kept: no copy on a CPU device
    if new_host.shape != ref_host.shape or new_host.dtype != ref_host.dtype:
        return [finding("mismatch_on_fresh_inputs", f"shape {tuple(new_host.shape)} {new_host.dtype}, the "
                                                    f"reference's {tuple(ref_host.shape)} {ref_host.dtype} ({when})",
                        strict_seed)]
    if allclose(ref_host, new_host, atol, rtol):
        return []
    if cuda and nan_where_finite(ref_host, new_host):
        return [finding("unwritten_output", f"NaN where the reference is finite after freed memory was filled with "
                                            f"NaN: an output the kernel never wrote (a launch that failed?) ({when})",
                        strict_seed)]
    for other, answer in answers.items():
        if other != seed and answer.shape == new_host.shape and answer.dtype == new_host.dtype \
                and allclose(answer, new_host, atol, rtol):
            return [finding("replayed_output", f"the output is the reference's answer to the inputs of seed {other}, "
                                               f"not to these ({when})", strict_seed)]
    n_bad = count_not_close(ref_host, new_host, atol, rtol)
    return [finding("mismatch_on_fresh_inputs", f"{n_bad} of {ref_host.numel()} elements outside "
                                                f"allclose(atol={atol:g}, rtol={rtol:g}) ({when})", strict_seed)]


def _determinism(new_model, on_device, inputs, ref_host, atol, rtol, strict_seed, warnings, seed) -> list:
    """The candidate twice on the same inputs: bitwise equal, or at least both within the
    tolerance (then a warning only: atomics and split reductions are legitimate)."""
    first = new_model(*on_device(inputs))
    second = new_model(*on_device(inputs))
    if not (isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor)):
        return []
    if shares_storage(first, second):
        return [finding("output_aliasing", f"two calls on the inputs of seed {seed} return the same storage: the "
                                           f"second call overwrote the first one's output", strict_seed)]
    a, b = first.detach().cpu(), second.detach().cpu()
    if a.shape == b.shape and a.dtype == b.dtype and equal_nan_as_zero(a, b):
        return []
    if a.shape == b.shape == ref_host.shape and allclose(ref_host, a, atol, rtol) and allclose(ref_host, b, atol, rtol):
        warnings.append(f"not bit-deterministic: two calls on the inputs of seed {seed} differ by "
                        f"{(a.double() - b.double()).abs().max().item():.3g} at most (both within the tolerance)")
        return []
    return [finding("nondeterministic", f"two calls on the inputs of seed {seed} differ, and not both are within "
                                        f"allclose(atol={atol:g}, rtol={rtol:g})", strict_seed)]
