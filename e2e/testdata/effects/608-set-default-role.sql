--@ writes:
SET DEFAULT ROLE {{role}} FOR {{user}}; SET DEFAULT ROLE NONE FOR {{user}}
