"""`robowire sim vrpn`: a VRPN server with devices like the mainline's NULL/example ones.

* `Tracker0`: `count` sensors (default 2) moving on circles, reported at `rate` Hz (default
  60, at most 1000) as Pos_Quat, plus Velocity and Acceleration unless `--set reports=pos`.
* `Analog0`: 4 channels of slow sine waves, sent at 10 Hz (analogs report on change).
* `Button0`: 2 buttons toggling every second; full States on connect and on every ping.
* `Dial0`: 2 dials turning 0.25 revolution every half second.
Names can be changed with `--set tracker=... analog=... button=... dial=...`; a client's
`set_update_rate` request changes the tracker rate (within 1..1000 Hz).
"""

from __future__ import annotations

import asyncio
import math

import numpy as np
import numpy.typing as npt

from robowire.errors import ConfigError
from robowire.protocols.vrpn.codec import DEFAULT_PORT
from robowire.protocols.vrpn.driver import VrpnLink
from robowire.protocols.vrpn.messages import (
    AnalogChannel,
    ButtonChange,
    ButtonStates,
    DialUpdate,
    Ping,
    TrackerAcceleration,
    TrackerSetUpdateRate,
    TrackerVelocity,
)
from robowire.protocols.vrpn.server import VrpnServer
from robowire.protocols.vrpn.session import MessageReceived
from robowire.service import Sim, SimOptions
from robowire.timebase import WallClock
from robowire.world import World

MAX_RATE = 1000.0
ANALOG_PERIOD = 0.1
BUTTON_PERIOD = 1.0
DIAL_PERIOD = 0.5
ANGULAR_SPEED = 0.5  # rad/s around each sensor's circle


def sensor_poses(t: float, count: int) -> tuple[npt.NDArray[np.float64], ...]:
    """Positions, xyzw quaternions, velocities and accelerations of every sensor at time t."""
    i = np.arange(count, dtype=np.float64)
    radius = 1.0 + 0.25 * i
    angle = ANGULAR_SPEED * t + i * (2 * math.pi / max(count, 1))
    c, s = np.cos(angle), np.sin(angle)
    position = np.stack([radius * c, radius * s, 1.0 + 0.1 * i], axis=1)
    velocity = np.stack([-radius * s, radius * c, 0 * i], axis=1) * ANGULAR_SPEED
    acceleration = np.stack([-radius * c, -radius * s, 0 * i], axis=1) * ANGULAR_SPEED**2
    yaw = angle + math.pi / 2  # facing along the direction of travel
    quaternion = np.stack([0 * i, 0 * i, np.sin(yaw / 2), np.cos(yaw / 2)], axis=1)
    return position, quaternion, velocity, acceleration


class VrpnSim(Sim):
    def __init__(self, options: SimOptions) -> None:
        self.host = options.host
        self.port = DEFAULT_PORT if options.port is None else options.port
        super().__init__(f"vrpn-sim@{self.host}:{self.port}")
        extra = options.options
        self.tracker = extra.get("tracker", "Tracker0")
        self.analog = extra.get("analog", "Analog0")
        self.button = extra.get("button", "Button0")
        self.dial = extra.get("dial", "Dial0")
        self.count = 2 if options.count is None else options.count
        self.rate = 60.0 if options.rate is None else float(options.rate)
        if not 1 <= self.count <= 1024:
            raise ConfigError("vrpn sim: --count (sensors) must be 1..1024")
        if not 0 < self.rate <= MAX_RATE:
            raise ConfigError(f"vrpn sim: --rate must be in (0, {MAX_RATE:.0f}] Hz")
        self.pose_only = extra.get("reports", "all") == "pos"
        self.buttons = [0, 0]
        self.server: VrpnServer | None = None
        self.frames = 0

    def _states(self) -> ButtonStates:
        return ButtonStates(states=tuple(self.buttons))

    def _on_connect(self, link: VrpnLink) -> None:
        if link.session is not None:  # what a Button_Filter does on Got_Connection
            link.session.send(self.button, self._states())

    def _on_message(self, link: VrpnLink, event: MessageReceived) -> None:
        session = link.session
        if session is None:
            return
        match event.message:
            case Ping() if event.sender == self.button:
                session.send(self.button, self._states())
            case TrackerSetUpdateRate(rate=rate) if event.sender == self.tracker:
                if math.isfinite(rate):
                    self.rate = min(max(rate, 1.0), MAX_RATE)

    async def run(self, world: World) -> None:
        loop = asyncio.get_running_loop()
        clock = WallClock()
        server = self.server = VrpnServer(
            [self.tracker, self.analog, self.button, self.dial],
            clock_offset=clock.wall(0.0),
            on_connect=self._on_connect,
            on_message=self._on_message,
            sensors=lambda name: self.count if name == self.tracker else 0,
        )
        serving = asyncio.create_task(server.run(self.host, self.port, self.listening))
        start = loop.time()
        next_frame = start
        next_analog = next_button = next_dial = start
        sensors = np.arange(self.count)
        try:
            while not serving.done():
                now = loop.time()
                t = now - start
                wall = clock.wall(now)
                position, quaternion, velocity, acceleration = sensor_poses(t, self.count)
                server.broadcast_poses(
                    self.tracker, sensors, position, quaternion, time=wall, flush=False
                )
                if not self.pose_only:
                    for k in range(self.count):
                        server.broadcast(
                            self.tracker,
                            TrackerVelocity(
                                sensor=k, velocity=tuple(velocity[k]), velocity_quaternion_dt=1.0
                            ),
                            time=wall,
                            reliable=False,
                            flush=False,
                        )
                        server.broadcast(
                            self.tracker,
                            TrackerAcceleration(
                                sensor=k,
                                acceleration=tuple(acceleration[k]),
                                acceleration_quaternion_dt=1.0,
                            ),
                            time=wall,
                            reliable=False,
                            flush=False,
                        )
                server.flush()  # one frame: one TCP write / few datagrams per client
                self.frames += 1
                self.stats.messages_out += self.count
                if now >= next_analog:
                    next_analog += ANALOG_PERIOD
                    channels = tuple(math.sin(0.5 * t + k) for k in range(4))
                    server.broadcast(
                        self.analog, AnalogChannel(channels=channels), time=wall, reliable=False
                    )
                if now >= next_button:
                    next_button += BUTTON_PERIOD
                    for b in range(len(self.buttons)):
                        self.buttons[b] ^= 1
                        server.broadcast(
                            self.button, ButtonChange(button=b, state=self.buttons[b]), time=wall
                        )
                if now >= next_dial:
                    next_dial += DIAL_PERIOD
                    for d in range(2):
                        server.broadcast(self.dial, DialUpdate(delta=0.25, dial=d), time=wall)
                next_frame += 1.0 / self.rate
                delay = next_frame - loop.time()
                if delay < -0.1:  # fell far behind (a busy machine): do not burst to catch up
                    next_frame = loop.time()
                    delay = 0.0
                await asyncio.sleep(max(delay, 0.0))
            serving.result()
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)
