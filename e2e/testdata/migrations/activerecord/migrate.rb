# Applies every migration in migrate/, then rolls the last one back, against
# the database the environment names (the proxy or the backend). With
# MIGRATE_UNTIL=version it applies the migrations up to that one only, and
# rolls nothing back.
require "active_record"

ActiveRecord::Base.establish_connection(
  adapter: "mysql2",
  host: ENV.fetch("DB_HOST"),
  port: Integer(ENV.fetch("DB_PORT")),
  username: ENV.fetch("DB_USER"),
  password: ENV.fetch("DB_PASSWORD"),
  database: ENV.fetch("DB_NAME"),
)
ActiveRecord::Migration.verbose = ENV["VERBOSE"] == "1"

context = ActiveRecord::MigrationContext.new(File.join(__dir__, "migrate"), ActiveRecord::SchemaMigration)
if (last = ENV["MIGRATE_UNTIL"])
  context.migrate(Integer(last))
else
  context.migrate
  context.rollback(1)
end
