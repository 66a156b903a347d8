"""recommenders"""
