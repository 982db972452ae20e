"""Your own robot on the XRP wire: WPILib programs drive it as they drive an XRP.

Its "physics" here is a toy (encoders count 500 a second at full output, the gyro's yaw follows
the difference); put your hardware or your simulator in `step` and `drive`.

python examples/xrp_robot.py 3540 60 &
python -m robotpy run-xrp --host 127.0.0.1 --port 3540      # a WPILib program drives it
robowire listen 'xrp://127.0.0.1:3540?enable=1&left=0.5&right=0.3'   # or robowire does
"""

import sys
import time

from robowire.protocols.xrp import Outputs, Robot, Sensors, serve


class Toy(Robot):
    def __init__(self) -> None:
        self.counts = [0.0, 0.0]
        self.last: float | None = None

    def drive(self, now: float, outputs: Outputs) -> None:
        pass  # real motors: set them to outputs.motors here (-1..1; 0 while disabled)

    def step(self, now: float, outputs: Outputs) -> Sensors:
        dt = 0.0 if self.last is None else now - self.last
        self.last = now
        left, right = outputs.motors[0], -outputs.motors[1]  # the right motor is mirrored
        self.counts[0] += 500 * left * dt
        self.counts[1] += 500 * right * dt
        left_count, right_count = int(self.counts[0]), int(self.counts[1])
        periods = [1 / (500 * v) if v else None for v in (left, right)]  # s per count
        return Sensors(
            encoder_counts=(left_count, right_count, 0, 0),
            encoder_periods=(periods[0], periods[1], None, None),
            gyro_angles=(0.0, 0.0, (right_count - left_count) / 10),  # degrees
        )


port = int(sys.argv[1]) if len(sys.argv) > 1 else 3540
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 3600.0
with serve(Toy(), port=port) as robot:
    assert robot.address is not None
    print(f"XRP robot on udp://{robot.address[0]}:{robot.address[1]}", flush=True)
    time.sleep(seconds)
