"""Lanes: reads and reports hold a bounded number of worker threads; everything else keeps anyio's pool."""

import threading

import anyio
import anyio.to_thread

from tools import recall, remember
from tools.common import Caller
from tools.lanes import Lanes


class Gate:
    """Work that says it started and then waits to be let go; counts how many run at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.running = 0
        self.most = 0
        self._count = threading.Lock()

    def work(self, value: str) -> str:
        with self._count:
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            assert self.release.wait(10)
            return value
        finally:
            with self._count:
                self.running -= 1


async def wait_for(condition, seconds: float = 5.0) -> None:
    with anyio.fail_after(seconds):
        while not condition():
            await anyio.sleep(0.01)


def test_no_more_reads_than_the_lane_holds_run_at_once_and_the_rest_answer_in_turn():
    lanes, gate = Lanes(reads=2, reports=1), Gate()
    answers: list[str] = []

    async def read(value: str) -> None:
        answers.append(await lanes.run("read", gate.work, value))

    async def main() -> None:
        async with anyio.create_task_group() as tasks:
            for value in "abcde":
                tasks.start_soon(read, value)
            await wait_for(lambda: gate.running == 2)
            await anyio.sleep(0.2)
            assert gate.running == 2  # three wait, without a thread
            assert lanes.limiter("read").borrowed_tokens == 2
            gate.release.set()

    anyio.run(main)
    assert gate.most == 2
    assert sorted(answers) == list("abcde")


def test_a_write_runs_while_the_read_lane_is_full_and_reports_have_their_own_lane():
    lanes, reads = Lanes(reads=1, reports=1), Gate()
    order: list[str] = []

    async def main() -> None:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(lanes.run, "read", reads.work, "a read")
            await wait_for(lambda: reads.running == 1)
            # A remember keeps anyio's own pool; a report has its own lane: neither waits for the read.
            order.append(await anyio.to_thread.run_sync(lambda: "write"))
            order.append(await lanes.run("report", lambda: "report"))
            assert reads.running == 1
            reads.release.set()

    anyio.run(main)
    assert order == ["write", "report"]


def test_each_event_loop_gets_its_own_limiters_with_the_lanes_sizes():
    lanes = Lanes(reads=3, reports=2)

    async def sizes() -> tuple[float, float]:
        read = lanes.limiter("read")
        assert lanes.limiter("read") is read  # one per loop
        await lanes.run("read", lambda: None)  # a limiter made by the loop before would not work here
        return read.total_tokens, lanes.limiter("report").total_tokens

    assert anyio.run(sizes) == anyio.run(sizes) == (3, 2)


def test_the_tools_take_their_lanes_recall_waits_for_a_read_thread_and_remember_does_not(runtime):
    runtime.lanes = Lanes(reads=1, reports=1)
    caller, gate = Caller("agent", "session"), Gate()
    done: list[str] = []

    async def call(name: str, coroutine) -> None:
        await coroutine
        done.append(name)

    async def main() -> None:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(runtime.lanes.run, "read", gate.work, "a long recall")
            await wait_for(lambda: gate.running == 1)
            recalled = recall.handle(recall.RecallInput(query="deploy steps"), runtime, caller)
            tasks.start_soon(call, "recall", recalled)
            content = remember.RememberInput(content="Deploys go out on Tuesdays")
            await call("remember", remember.handle(content, runtime, caller))
            await anyio.sleep(0.2)
            assert done == ["remember"]  # the recall still waits for the one read thread
            gate.release.set()

    anyio.run(main)
    assert done == ["remember", "recall"]
