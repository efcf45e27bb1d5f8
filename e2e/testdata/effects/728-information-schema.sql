--@ writes:
SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = '{{db}}'
