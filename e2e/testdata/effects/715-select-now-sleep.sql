--@ writes:
--@ piece
SELECT NOW(), SLEEP(0)
