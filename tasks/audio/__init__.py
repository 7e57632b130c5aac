"""Recordings: decode and filter with ffmpeg (`decode.py`), find speech (`vad.py`: the `Vad` interface, Silero),
transcribe windows (`asr.py`: the `AsrEngine` interface, faster-whisper), and the per-recording fan-out the refresh
runs through the page cache (`speech.py`)."""
