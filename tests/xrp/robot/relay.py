"""A headless WPILib program for the relay round trip (tests/bridge/test_roundtrip.py): it
prints one line `READINGS {json}` with everything the XRP classes read, then quits.

`ROBOWIRE_ROBOT_MODE=drive`: enables itself 0.5 s after starting, then (seconds after enabling)
0-1.5 straight at 0.6 with the LED on and servo 4 at 0.25, 1.5-3.0 turn left (left -0.5,
right +0.5), 3.0-3.6 stopped; reads at 3.6 (still enabled).
`ROBOWIRE_ROBOT_MODE=read` (the default): never enables; reads once the left encoder has
counted something (the robot was driven before) or after 6 s.
"""

import json
import os

import wpilib
from wpilib.simulation import DriverStationSim

import xrp

MODE = os.environ.get("ROBOWIRE_ROBOT_MODE", "read")
STRAIGHT = 0.6
TURN = 0.5


class MyRobot(wpilib.TimedRobot):
    def robotInit(self) -> None:
        self.left = xrp.XRPMotor(0)
        self.right = xrp.XRPMotor(1)
        self.right.setInverted(True)
        self.arm = xrp.XRPServo(4)
        self.encoders = [wpilib.Encoder(a, a + 1) for a in (4, 6, 8, 10)]
        self.gyro = xrp.XRPGyro()
        self.accel = wpilib.BuiltInAccelerometer()
        self.io = xrp.XRPOnBoardIO()
        self.reflectance = xrp.XRPReflectanceSensor()
        self.rangefinder = xrp.XRPRangefinder()
        self.start = wpilib.Timer.getFPGATimestamp()
        self.enabled_at = None
        self.done = False

    def readings(self) -> dict[str, object]:
        gyro, accel = self.gyro, self.accel
        return {
            "enabled": wpilib.DriverStation.isEnabled(),
            "counts": [e.get() for e in self.encoders],
            "rates": [e.getRate() for e in self.encoders],
            "gyro_angle": [gyro.getAngleX(), gyro.getAngleY(), gyro.getAngleZ()],
            "gyro_rate": [gyro.getRateX(), gyro.getRateY(), gyro.getRateZ()],
            "accel": [accel.getX(), accel.getY(), accel.getZ()],
            "reflectance": [
                self.reflectance.getLeftReflectanceValue(),
                self.reflectance.getRightReflectanceValue(),
            ],
            "range": self.rangefinder.getDistance(),
            "button": self.io.getUserButtonPressed(),
        }

    def finish(self) -> None:
        self.done = True
        print("READINGS " + json.dumps(self.readings()), flush=True)
        self.endCompetition()

    def robotPeriodic(self) -> None:
        if self.done:
            return
        now = wpilib.Timer.getFPGATimestamp()
        if MODE != "drive":
            if (now - self.start > 1.0 and self.encoders[0].get() != 0) or now - self.start > 6:
                self.finish()
            return
        if self.enabled_at is None:
            if now - self.start > 0.5:
                DriverStationSim.setDsAttached(True)
                DriverStationSim.setEnabled(True)
                DriverStationSim.notifyNewData()
                self.enabled_at = now
            return
        t = now - self.enabled_at
        if t < 1.5:
            left, right = STRAIGHT, STRAIGHT
        elif t < 3.0:
            left, right = -TURN, TURN
        else:
            left, right = 0.0, 0.0
        self.left.set(left)
        self.right.set(right)
        self.io.setLed(t < 1.5)
        self.arm.setPosition(0.25)
        if t >= 3.6:
            self.finish()
