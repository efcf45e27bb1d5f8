class UniquePostsSlug < ActiveRecord::Migration[6.1]
  def change
    add_index :posts, :slug, unique: true, name: "posts_slug_unique"
  end
end
