--@ writes:
--@ piece
GRANT SELECT ON {{db}}.{{other}} TO {{role}}
