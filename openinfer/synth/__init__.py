"""synth"""
