--@ writes:
--@ piece
USE {{db}}
