--@ writes:
--@ piece
DO SLEEP(0)
