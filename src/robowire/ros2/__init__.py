"""ROS 2 without ROS (docs/ros2.md)."""
