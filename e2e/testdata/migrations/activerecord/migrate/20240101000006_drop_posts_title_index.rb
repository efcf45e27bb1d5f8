class DropPostsTitleIndex < ActiveRecord::Migration[6.1]
  def change
    remove_index :posts, :title, name: "posts_title_idx"
  end
end
