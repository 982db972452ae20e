"""A headless WPILib program for the interop test: enables itself, drives a fixed pattern,
stops, waits for the wheels to settle, prints what it reads, and quits (still enabled).

Phases (seconds after enabling): 0-1.5 straight at 0.6; 1.5-3.0 turn left (left -0.5,
right +0.5); 3.0-3.6 stopped; then print `FINAL ...` and end.
"""

import wpilib
from wpilib.simulation import DriverStationSim

import xrp

STRAIGHT = 0.6
TURN = 0.5


class MyRobot(wpilib.TimedRobot):
    def robotInit(self) -> None:
        self.left = xrp.XRPMotor(0)
        self.right = xrp.XRPMotor(1)
        self.right.setInverted(True)
        self.left_encoder = wpilib.Encoder(4, 5)
        self.right_encoder = wpilib.Encoder(6, 7)
        self.gyro = xrp.XRPGyro()
        self.start = wpilib.Timer.getFPGATimestamp()
        self.enabled_at = None
        self.done = False

    def robotPeriodic(self) -> None:
        now = wpilib.Timer.getFPGATimestamp()
        if self.enabled_at is None:
            if now - self.start > 0.5:
                DriverStationSim.setDsAttached(True)
                DriverStationSim.setEnabled(True)
                DriverStationSim.notifyNewData()
                self.enabled_at = now
                print(f"ENABLE t={now - self.start:.3f}", flush=True)
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
        if t >= 3.6 and not self.done:
            self.done = True
            print(
                f"FINAL enabled={wpilib.DriverStation.isEnabled()} "
                f"left={self.left_encoder.get()} right={self.right_encoder.get()} "
                f"gyro={self.gyro.getAngle():.4f} rate={self.gyro.getRateZ():.4f}",
                flush=True,
            )
            self.endCompetition()
