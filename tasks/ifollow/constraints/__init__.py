"""Constraint types for instruction following, one registry for IFEval, IFBench and MulDimIF ids."""
