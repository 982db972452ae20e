"""A simulated robot and a WPILib-side client linked in memory, time stepped by hand."""

from __future__ import annotations

from robowire.protocols.xrp.physics import Fleet
from robowire.protocols.xrp.session import ClientSession, RobotSession

ROBOT = ("10.0.0.2", 3540)
CLIENT = ("10.0.0.1", 50000)


class Pair:
    def __init__(self, fleet: Fleet | None = None) -> None:
        self.fleet = fleet or Fleet(1)
        self.robot = RobotSession(self.fleet)
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
            deadline = self.robot.next_deadline()
            if deadline is not None and deadline <= t:
                self.robot_events += self.robot.tick(t)
            for data, addr in self.robot.datagrams_to_send():
                assert addr == CLIENT
                if self.client_alive:
                    self.client_events += self.client.feed_datagram(data, ROBOT, t)
