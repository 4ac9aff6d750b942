"""NVIDIA MIG: the profile table per GPU model and the placement rules on the 8-slice memory axis.

Pure facts and checks, shared by the node agent (which applies layouts) and the
planner (which chooses them). The table lives in ``profiles.yaml`` beside this
module and cites NVIDIA's MIG user guide.
"""
