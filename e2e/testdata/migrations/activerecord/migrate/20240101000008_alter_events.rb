# Alters events, which the end-to-end test caches through the proxy just
# before this step (after the rows of 20240101000007).
class AlterEvents < ActiveRecord::Migration[6.1]
  def up
    add_column :events, :source, :string, limit: 20, null: false, default: "web"
    change_column :events, :kind, :string, limit: 80, null: false
    rename_column :events, :level, :severity
  end

  def down
    rename_column :events, :severity, :level
    change_column :events, :kind, :string, limit: 50, null: false
    remove_column :events, :source
  end
end
