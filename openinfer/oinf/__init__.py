"""oinf"""
