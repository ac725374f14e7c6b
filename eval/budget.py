"""What a bench may spend: a run directory's caps on cost and tokens (`Budget`), checked before every backbone
call by the wrapper that charges each reply to the run and to the item being answered (`MeteredBackbone`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..backbones import Backbone, Reply, Request
from ..backbones.base import Wrapper
from .records import Spend


class BudgetExceeded(BaseException):
    """A cap was reached: the call was not made. A BaseException, like KeyboardInterrupt, so a
    policy that turns its backbone's errors into invalid answers cannot swallow the stop."""


class Budget:
    """Spending of a run directory against its caps; thread-safe."""

    def __init__(self, max_cost_usd: float | None = None, max_tokens: int | None = None, spent: Spend | None = None):
        self.max_cost_usd = max_cost_usd
        self.max_tokens = max_tokens
        self.before = spent or Spend()  # what earlier invocations spent
        self.now = Spend()  # this invocation
        self.exceeded: str | None = None
        self.reserved = 0  # output tokens that calls in flight may still spend
        self._lock = threading.Lock()

    def check(self, reserve: int = 0) -> None:
        """Before a call: refuse it unless what is spent, what calls in flight may still spend
        and this call's output limit (`reserve`, its max_tokens) fit under the token cap; then
        hold `reserve` until `charge`. Input tokens are known only when a call returns."""
        with self._lock:
            if self.exceeded:
                raise BudgetExceeded(self.exceeded)
            cost = self.before.cost_usd + self.now.cost_usd
            tokens = self.before.tokens + self.now.tokens
            if self.max_cost_usd is not None and cost >= self.max_cost_usd:
                self.exceeded = f"cost cap ${self.max_cost_usd:.2f} reached (${cost:.4f} spent)"
            elif self.max_tokens is not None and tokens + self.reserved + reserve > self.max_tokens:
                self.exceeded = (f"token cap {self.max_tokens} reached ({tokens} tokens spent; the next call may "
                                 f"produce {reserve} more)")
            if self.exceeded:
                raise BudgetExceeded(self.exceeded)
            self.reserved += reserve

    def release(self, reserved: int) -> None:
        with self._lock:
            self.reserved -= reserved

    def charge(self, reply: Any, item_spend: Spend | None, reserved: int = 0) -> None:
        self.release(reserved)
        fresh = Spend(transient=int(bool(getattr(reply, "transient", False))))
        if getattr(reply, "cached", False):
            fresh.cache_hits = 1
        else:
            u = reply.usage
            fresh.calls = 1
            fresh.tokens = int(u.input_tokens) + int(u.output_tokens)
            if u.cost_usd is None:
                fresh.unpriced_calls = 1
            else:
                fresh.cost_usd = float(u.cost_usd)
        self.add(fresh, item_spend)

    def add(self, fresh: Spend, item_spend: Spend | None = None) -> None:
        """Count spending measured elsewhere (a Ray worker's calls) against the run and the item."""
        with self._lock:
            self.now.add(fresh)
            if item_spend is not None:
                item_spend.add(fresh)


class MeteredBackbone(Wrapper):
    """Wraps a backbone: checks the budget before each call and charges what came back,
    both to the run and to the item being answered on this thread."""

    def __init__(self, inner: Backbone, budget: Budget, spec: str):
        super().__init__(inner, name=spec)
        self.budget = budget
        self._local = threading.local()

    def begin_item(self) -> Spend:
        self._local.spend = Spend()
        return self._local.spend

    def _item(self) -> Spend | None:
        return getattr(self._local, "spend", None)

    def charge_spend(self, spend: Spend) -> None:
        """Charge calls made with this backbone's spec in another process to the run and the
        item being answered on this thread (scale/ray_bench.py answers items in Ray workers)."""
        self.budget.add(spend, self._item())

    def _metered(self, call: Callable[[], Any], reserves: list[int]) -> list[Any]:
        """Check the caps with the calls' output limits held, call, then charge what came back."""
        self.budget.check(sum(reserves))
        try:
            replies: list[Any] = call()
        except BaseException:
            self.budget.release(sum(reserves))
            raise
        for reply, reserve in zip(replies, reserves):
            self.budget.charge(reply, self._item(), reserve)
        return replies

    def send(self, request: Request) -> Reply:
        reply: Reply = self._metered(lambda: [self.inner.send(request)], [request.max_tokens])[0]
        return reply
