"""Sample documents of the fictional Northwind Robotics, and the script that makes them (make.py)."""
