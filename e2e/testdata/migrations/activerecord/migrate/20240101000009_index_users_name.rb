# The step the test rolls back.
class IndexUsersName < ActiveRecord::Migration[6.1]
  def change
    add_index :users, :name, name: "users_name_idx"
  end
end
