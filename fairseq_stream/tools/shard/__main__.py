"""``python -m fairseq_stream.tools.shard``: the same as ``fairseq-stream-shard``."""
from fairseq_stream.tools.shard.cli import main

if __name__ == "__main__":
    main()
