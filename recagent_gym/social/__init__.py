"""social"""
