"""A simulated robot and a WPILib-side client linked in memory, time stepped by hand."""

from __future__ import annotations

from typing import Any

from robowire.protocols.xrp.events import RobotEvent
from robowire.protocols.xrp.model import Fleet
from robowire.protocols.xrp.session_robot import RobotSession
from robowire.protocols.xrp.session_wpilib import ClientSession
from robowire.wire import Address

ROBOT = ("10.0.0.2", 3540)
CLIENT = ("10.0.0.1", 50000)


class Robot(RobotSession):
    """A robot session whose output events drive its fleet row, as the simulator wires them."""

    def __init__(self, fleet: Fleet, index: int = 0, **options: Any) -> None:
        super().__init__(fleet, index, **options)
        self.fleet = fleet

    def feed_datagram(self, data: bytes, addr: Address, now: float) -> list[RobotEvent]:
        events = super().feed_datagram(data, addr, now)
        self.fleet.apply(self.index, events)
        return events

    def tick(self, now: float) -> list[RobotEvent]:
        events = super().tick(now)
        self.fleet.apply(self.index, events)
        return events


class Pair:
    def __init__(self, fleet: Fleet | None = None) -> None:
        self.fleet = fleet or Fleet(1)
        self.robot = Robot(self.fleet)
        self.client = ClientSession(ROBOT)
        self.now = 0.0
        self.robot_events: list[object] = []
        self.client_events: list[object] = []
        self.client_alive = True

    def run(self, seconds: float, step: float = 0.001) -> None:
        end = self.now + seconds
        while self.now < end - 1e-12:
            self.now += step
            t = self.now
            if self.client_alive:
                deadline = self.client.next_deadline()
                if deadline is not None and deadline <= t:
                    self.client.tick(t)
                for data, _ in self.client.datagrams_to_send():
                    self.robot_events += self.robot.feed_datagram(data, CLIENT, t)
            while (deadline := self.robot.next_deadline()) is not None and deadline <= t:
                self.robot_events += self.robot.tick(t)  # a change first, then a due status
            for data, addr in self.robot.datagrams_to_send():
                assert addr == CLIENT
                if self.client_alive:
                    self.client_events += self.client.feed_datagram(data, ROBOT, t)
